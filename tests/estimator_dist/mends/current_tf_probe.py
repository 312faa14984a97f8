"""What plain TensorFlow offers an Estimator program, printed as one JSON object.

    python current_tf_probe.py [--package-first]

Without ``--package-first`` nothing of estimator_dist is imported: the facts are
TensorFlow's own. With it, ``import estimator_dist`` comes before ``import tensorflow``
(the order a program may use), and the facts are what the package gives back.
"""
import json
import sys


def _error(action):
    try:
        action()
    except Exception as error:  # pylint: disable=broad-except
        return f"{type(error).__name__}: {error}"
    return None


def main():
    if "--package-first" in sys.argv:
        import estimator_dist  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from tensorflow.python.util import tf_export  # pylint: disable=import-outside-toplevel

    def import_module(name):
        return lambda: __import__(name)

    def layer(name):
        return lambda: getattr(tf.compat.v1.layers if name == "dense" else
                               tf.compat.v1.nn.rnn_cell, name)

    facts = {
        "release": ".".join(tf.__version__.split(".")[:2]),
        "estimator_api_name": getattr(tf_export, "ESTIMATOR_API_NAME", None),
        "estimator_training": _error(
            import_module("tensorflow.python.distribute.estimator_training")),
        "session_support": _error(import_module("tensorflow.python.tpu.session_support")),
        "tensorflow_estimator": _error(import_module("tensorflow_estimator")),
        "tf_estimator": _error(lambda: tf.estimator.Estimator),
        "v1_estimator": _error(lambda: tf.compat.v1.estimator.RunConfig),
        "dense": _error(layer("dense")),
        "basic_lstm_cell": _error(layer("BasicLSTMCell")),
        "dense_features": _error(lambda: tf.keras.layers.DenseFeatures),
        "keras": tf.keras.__name__ if hasattr(tf.keras, "__name__") else None,
    }
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
