"""A legacy-style program trained in float32 and in mixed bfloat16; run as a module.

    python -m tests.estimator_dist.precision_job MODEL_DIR STRATEGY PRECISION [tf1]

PRECISION is "float32" or "bfloat16". The program is written the way Estimator code is:
``tf.compat.v1.layers`` and ``tf.compat.v1.losses`` in a model_fn, an input_fn that
ignores ``input_context`` (so each replica takes a whole batch), ``estimator.train``
on every route. Only its config line names the precision. Prints, on the chief, ``LOSS``
(the eval loss of the checkpoint's weights, computed in numpy: a float32 reader) and
``DTYPES`` (of the checkpoint's variables) and ``OPS`` (``OpDtypesHook``'s counts).
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


def input_fn(seed, repeat):
    x, y = data(seed)
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
    if repeat:
        dataset = dataset.shuffle(4096, seed=seed).repeat()
    return dataset.batch(BATCH, drop_remainder=True)


def checkpoint_loss(model_dir, x, y):
    """The model's mean cross-entropy on (x, y), from its checkpoint's weights in numpy."""
    layers = sorted({name.rsplit("/", 1)[0] for name, _ in tf.train.list_variables(model_dir)
                     if name.startswith("dense") and name.endswith("/kernel")},
                    key=lambda layer: int(layer.partition("_")[2] or 0))
    net = x
    for i, layer in enumerate(layers):
        net = net @ tf.train.load_variable(model_dir, layer + "/kernel") + tf.train.load_variable(
            model_dir, layer + "/bias")
        net = np.maximum(net, 0) if i < len(layers) - 1 else net
    net = net - net.max(axis=1, keepdims=True)
    log_probs = net - np.log(np.exp(net).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(y)), y].mean()


def main(model_dir, strategy, precision, options):
    mixed = None if precision == "float32" else precision
    replicas = {"num_replicas": 2} if strategy == "mirrored" else {}
    config = estimator_dist.make_run_config(strategy, model_dir=model_dir, tf_random_seed=1,
                                            mixed_precision=mixed, **replicas)
    estimator = tf.estimator.Estimator(model_fn, config=config, params={
        "hidden_units": [128, 128], "learning_rate": 0.003})
    ops = OpDtypesHook()
    estimator.train(lambda: input_fn(0, repeat=True), max_steps=STEPS, hooks=[ops])
    if not config.is_chief:
        return
    print("OPS", json.dumps(ops.counts), flush=True)
    loss = checkpoint_loss(model_dir, *data(5))
    dtypes = sorted({str(tf.train.load_variable(model_dir, name).dtype)
                     for name, _ in tf.train.list_variables(model_dir)})
    print("LOSS", json.dumps(float(loss)), flush=True)
    print("DTYPES", json.dumps(dtypes), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
