"""A model_fn trained in float32 or in mixed bfloat16; run as a module.

    python -m tests.programs.precision_job MODEL_DIR STRATEGY PRECISION [tf1]
        [model={layers,dense,lstm}]

PRECISION is "float32" or "bfloat16". "layers" (the default) is written the way Estimator
code is: ``tf.compat.v1.layers`` and ``tf.compat.v1.losses`` in a model_fn, an input_fn
that ignores ``input_context`` (so each replica takes a whole batch), ``estimator.train``
on every route; "dense" and "lstm" are the package's model_fns on the same data. Only the
config line names the precision. Prints, on the chief, ``OPS`` (``OpDtypesHook``'s
counts), ``DTYPES`` (of the checkpoint's variables) and ``LOSS`` (the eval loss of the
checkpoint read by a plain float32 Estimator). Under TF2 behaviour a seeded run does not
repeat exactly; ``tf1`` makes the float32 and bfloat16 runs start alike.
"""
import json
import os
import sys

if __name__ == "__main__" and "tf1" in sys.argv[4:]:
    import tensorflow as tf

    tf.compat.v1.disable_v2_behavior()
import collections

import numpy as np
import tensorflow as tf

import estimator_dist
from model_fns import dense_classifier_model_fn, lstm_model_fn

STEPS = 150
BATCH = 64


def data(seed=0, examples=16384):
    """64 features, 4 classes from a random linear map, 10 % of labels flipped: the loss
    levels off well above zero, where a relative tolerance means something."""
    rng = np.random.RandomState(seed)
    x = rng.randn(examples, 64).astype(np.float32)
    y = np.argmax(x @ np.random.RandomState(1).randn(64, 4), axis=1)
    flip = rng.rand(examples) < 0.1
    y[flip] = rng.randint(0, 4, flip.sum())
    return x, y.astype(np.int64)


class OpDtypesHook(tf.compat.v1.train.SessionRunHook):
    """Records, at the second step, (op, dtype) -> count of the graph as TensorFlow ran it
    (after the graph rewrites), for the ops named in ``OPS``."""

    OPS = ("MatMul", "_MklMatMul", "_MklNativeMatMul", "_MklNativeFusedMatMul", "AddN",
           "CollectiveReduceV2", "ResourceApplyAdam")

    def __init__(self):
        self.counts, self._runs = None, 0

    def before_run(self, run_context):
        del run_context  # The hook fetches nothing.
        options = tf.compat.v1.RunOptions(output_partition_graphs=True)
        return tf.compat.v1.train.SessionRunArgs({}, options=options)

    def after_run(self, run_context, run_values):
        self._runs += 1
        if self._runs != 2:
            return
        self.counts = collections.Counter(
            f"{node.op}:{tf.dtypes.as_dtype(node.attr['T'].type).name}"
            for graph in run_values.run_metadata.partition_graphs for node in graph.node
            if node.op in self.OPS)


def model_fn(features, labels, mode, params):
    init = tf.compat.v1.glorot_uniform_initializer
    net = features["x"]
    for i, units in enumerate(params["hidden_units"]):
        net = tf.compat.v1.layers.dense(net, units, activation=tf.nn.relu,
                                        kernel_initializer=init(seed=i))
    logits = tf.compat.v1.layers.dense(net, 4, kernel_initializer=init(seed=9))
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    optimizer = tf.compat.v1.train.AdamOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


# model -> (model_fn, params, one example's x shape): the legacy program above and the
# package's model_fns, on the same data (the LSTM reads the 64 features as 16 steps of 4).
MODELS = {
    "layers": (model_fn, {"hidden_units": [128, 128], "learning_rate": 0.003}, [64]),
    "dense": (dense_classifier_model_fn, {"hidden_units": [128, 128], "num_classes": 4,
                                          "learning_rate": 0.003}, [64]),
    "lstm": (lstm_model_fn, {"num_units": 32, "num_classes": 4, "learning_rate": 0.01},
             [16, 4]),
}


def input_fn(seed, shape, repeat):
    x, y = data(seed)
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x.reshape([-1, *shape])}, y))
    if repeat:
        dataset = dataset.shuffle(4096, seed=seed).repeat()
    return dataset.batch(BATCH, drop_remainder=True)


def float32_eval_loss(model, model_dir):
    """The eval loss of the checkpoint, read by a plain float32 Estimator on one device."""
    os.environ.pop("TF_CONFIG", None)  # Training is over: evaluate in this process alone.
    model_fn_, params, shape = MODELS[model]
    estimator = tf.estimator.Estimator(model_fn_, model_dir=model_dir, params=params)
    return estimator.evaluate(lambda: input_fn(5, shape, repeat=False))["loss"]


def main(model_dir, strategy, precision, options):
    model = next((o.split("=", 1)[1] for o in options if o.startswith("model=")), "layers")
    model_fn_, params, shape = MODELS[model]
    mixed = None if precision == "float32" else precision
    replicas = {"num_replicas": 2} if strategy == "mirrored" else {}
    config = estimator_dist.make_run_config(strategy, model_dir=model_dir, tf_random_seed=1,
                                            mixed_precision=mixed, **replicas)
    estimator = tf.estimator.Estimator(model_fn_, config=config, params=params)
    ops = OpDtypesHook()
    estimator.train(lambda: input_fn(0, shape, repeat=True), max_steps=STEPS, hooks=[ops])
    if not config.is_chief or config.task_id:  # Every worker counts as chief under MWMS.
        return
    print("OPS", json.dumps(ops.counts), flush=True)
    dtypes = sorted({str(tf.train.load_variable(model_dir, name).dtype)
                     for name, _ in tf.train.list_variables(model_dir)})
    print("DTYPES", json.dumps(dtypes), flush=True)
    print("LOSS", json.dumps(float(float32_eval_loss(model, model_dir))), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
