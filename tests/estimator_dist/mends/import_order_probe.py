"""Imports tensorflow-estimator and estimator_dist in the order a program may, then trains
a canned estimator a step; prints one JSON object.

    python import_order_probe.py package-first | estimator-first

``package-first``: ``import estimator_dist`` then ``import tensorflow_estimator``, before
TensorFlow. ``estimator-first``: ``import tensorflow_estimator`` first (TensorFlow 2.16+
refuses it alone: the error is recorded), then ``import estimator_dist``.
"""
import json
import sys
import tempfile


def _error(action):
    try:
        action()
    except Exception as error:  # Any failure is the probe's result.
        return f"{type(error).__name__}: {error}"
    return None


def _import_estimator():
    import tensorflow_estimator  # noqa: F401


def _train_canned():
    import numpy as np
    import tensorflow as tf

    columns = [tf.feature_column.numeric_column("x", shape=[2])]
    estimator = tf.estimator.DNNClassifier([4], columns, model_dir=tempfile.mkdtemp())
    features = {"x": np.ones([8, 2], np.float32)}
    estimator.train(lambda: tf.data.Dataset.from_tensors((features, np.zeros([8]))), steps=1)


def main():
    order = sys.argv[1]
    facts = {}
    if order == "package-first":
        import estimator_dist  # noqa: F401  (imported for its mends)
        facts["tensorflow_estimator"] = _error(_import_estimator)
    else:
        facts["tensorflow_estimator"] = _error(_import_estimator)
        facts["estimator_dist"] = _error(lambda: __import__("estimator_dist"))
    facts["canned"] = _error(_train_canned)
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
