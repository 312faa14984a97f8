"""A CTR program as deepctr's published Estimator examples write it
(``run_estimator_tfrecord_classification.py``, ``run_estimator_pandas_classification.py``):
feature columns for the linear and the DNN part, ``DeepFMEstimator``, deepctr's own input
helpers ``input_fn_tfrecord`` and ``input_fn_pandas``, ``train`` then ``evaluate``.

    python tests/programs/deepctr_ctr.py MODEL_DIR default
    python tests/programs/deepctr_ctr.py MODEL_DIR mirrored
    python -m estimator_dist.launch --workers 2 -- \\
        python tests/programs/deepctr_ctr.py MODEL_DIR multi_worker

"default" is the program as written: a plain ``RunConfig`` and no estimator_dist line (on
TensorFlow 2.16+ ``tf.estimator`` comes from the package's interpreter-start hook). Under a
strategy the config line becomes ``estimator_dist.make_run_config(STRATEGY, ...)``, and
deepctr's helpers, which return iterator and queue tensors, are refused in one line naming
them; the user's change is an input_fn that returns the Dataset
(``dataset_input_fn`` below) and the package's ``input_fns.pandas_input_fn``.

Prints ``REFUSED <helper> <message>`` for each refused helper and ``RESULT deepctr <json>``
with the evaluations.
"""
import json
import os
import sys
import tempfile

import numpy as np
import pandas as pd
import tensorflow as tf
from tensorflow.python.ops.parsing_ops import FixedLenFeature

from deepctr.estimator import DeepFMEstimator
from deepctr.estimator.inputs import input_fn_pandas, input_fn_tfrecord

SPARSE = ["C1", "C2", "C3"]
DENSE = ["I1", "I2"]
VOCABULARY = 10
ROWS = 256
STEPS = 10


def _frame(seed):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({name: rng.integers(0, VOCABULARY, ROWS) for name in SPARSE})
    for name in DENSE:
        frame[name] = rng.random(ROWS).astype(np.float32)
    frame["label"] = ((frame["C1"] + 10 * frame["I1"]) > 9).astype(np.float32)
    return frame


def _write_tfrecord(frame, path):
    with tf.io.TFRecordWriter(path) as writer:
        for row in frame.itertuples(index=False):
            feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(
                value=[getattr(row, name)])) for name in SPARSE}
            feature.update({name: tf.train.Feature(float_list=tf.train.FloatList(
                value=[getattr(row, name)])) for name in DENSE + ["label"]})
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=feature)).SerializeToString())


def _feature_columns():
    linear, dnn = [], []
    for name in SPARSE:
        column = tf.feature_column.categorical_column_with_identity(name, VOCABULARY)
        dnn.append(tf.feature_column.embedding_column(column, 4))
        linear.append(column)
    for name in DENSE:
        column = tf.feature_column.numeric_column(name)
        dnn.append(column)
        linear.append(column)
    return linear, dnn


def _feature_description():
    description = {name: FixedLenFeature(dtype=tf.int64, shape=1) for name in SPARSE}
    description.update({name: FixedLenFeature(dtype=tf.float32, shape=1) for name in DENSE})
    description["label"] = FixedLenFeature(dtype=tf.float32, shape=1)
    return description


def dataset_input_fn(filenames, description, label, batch_size, num_epochs=None):
    """deepctr's input_fn_tfrecord returning the Dataset, sized per replica."""

    def parse(serialized):
        features = tf.io.parse_single_example(serialized, features=description)
        return features, features.pop(label)

    def input_fn(input_context=None):
        dataset = tf.data.TFRecordDataset(filenames).map(parse)
        size = batch_size
        if input_context is not None:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
            size = input_context.get_per_replica_batch_size(batch_size)
        return dataset.repeat(num_epochs).batch(size)

    return input_fn


def _refusal(model, name, input_fn):
    """The one-line refusal of a deepctr helper under a strategy."""
    try:
        model.train(input_fn, steps=1)
    except Exception as error:  # noqa: BLE001 - the refusal is what is printed.
        print(f"REFUSED {name} {type(error).__name__}: {error}", flush=True)
        return
    raise AssertionError(f"{name} trained under a strategy")


def main(model_dir, strategy):
    if strategy == "default":
        config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=1)
    else:
        import estimator_dist
        config = estimator_dist.make_run_config(strategy, model_dir=model_dir, tf_random_seed=1)
    data = tempfile.mkdtemp()
    train, test = _frame(0), _frame(1)
    paths = [os.path.join(data, name) for name in ("train.tfrecords", "test.tfrecords")]
    _write_tfrecord(train, paths[0])
    _write_tfrecord(test, paths[1])
    linear, dnn = _feature_columns()
    features = SPARSE + DENSE
    model = DeepFMEstimator(linear, dnn, task="binary", config=config)
    description = _feature_description()
    results = {}
    if strategy == "default":
        model.train(input_fn_tfrecord(paths[0], description, "label", batch_size=32,
                                      num_epochs=None), steps=STEPS)
        results["tfrecord"] = model.evaluate(
            input_fn_tfrecord(paths[1], description, "label", batch_size=64, num_epochs=1,
                              shuffle_factor=0))
        model.train(input_fn_pandas(train, features, "label", batch_size=32, num_epochs=None,
                                    shuffle=True), steps=STEPS)
        results["pandas"] = model.evaluate(input_fn_pandas(test, features, "label",
                                                           batch_size=64))
    else:
        from input_fns import pandas_input_fn
        _refusal(model, "input_fn_tfrecord",
                 input_fn_tfrecord(paths[0], description, "label", batch_size=32))
        _refusal(model, "input_fn_pandas", input_fn_pandas(train, features, "label"))
        model.train(dataset_input_fn(paths[0], description, "label", 32), steps=STEPS)
        results["tfrecord"] = model.evaluate(
            dataset_input_fn(paths[1], description, "label", 64, num_epochs=1))
        model.train(pandas_input_fn(train[features], train["label"], batch_size=32,
                                    num_epochs=None, shuffle=True), steps=STEPS)
        results["pandas"] = model.evaluate(pandas_input_fn(test[features], test["label"],
                                                           batch_size=64, shuffle=False))
    print("RESULT deepctr " + json.dumps(
        {kind: {key: float(value) for key, value in metrics.items()}
         for kind, metrics in results.items()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
