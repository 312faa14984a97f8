"""What plain TensorFlow offers an Estimator program, printed as one JSON object.

    python current_tf_probe.py [--package-first]

Without ``--package-first`` nothing of estimator_dist is imported (the suite runs its
children with the interpreter-start hook off): the facts are TensorFlow's own. With it,
``import estimator_dist`` comes before ``import tensorflow`` (the order a program may use),
and the facts are what the package gives back.
"""
import json
import sys


def _error(action):
    try:
        action()
    except Exception as error:  # Any failure is the probe's result.
        return f"{type(error).__name__}: {error}"
    return None


def _keras_layers_in_model_fn():
    """Trains and evaluates a model_fn of tf.keras layers (new graph per call)."""
    import tempfile

    import tensorflow as tf  # Late: loads TensorFlow.

    def model_fn(features, labels, mode):
        logits = tf.keras.layers.Dense(2)(tf.keras.layers.Dense(4)(features["x"]))
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
            labels, logits, from_logits=True))
        step = tf.compat.v1.train.get_or_create_global_step()
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, step)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn():
        x = tf.random.stateless_uniform([8, 3], seed=[1, 2])
        return tf.data.Dataset.from_tensors(({"x": x}, tf.zeros([8], tf.int32))).repeat(2)

    estimator = tf.estimator.Estimator(model_fn, model_dir=tempfile.mkdtemp())
    estimator.train(input_fn, steps=2)
    estimator.evaluate(input_fn, steps=1)


def _summary_without_tensorboard():
    """``tf.summary.scalar`` with TensorBoard's import refused (as if not installed)."""
    import importlib.abc

    import tensorflow as tf  # Late: loads TensorFlow.

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] == "tensorboard":
                raise ImportError(f"No module named {name!r}")

    for name in [name for name in sys.modules if name.split(".")[0] == "tensorboard"]:
        del sys.modules[name]
    sys.meta_path.insert(0, Refuse())
    with tf.Graph().as_default():
        tf.summary.scalar("loss", 1.0)


def main():
    if "--package-first" in sys.argv:
        import estimator_dist  # noqa: F401  (imported for its mends)
    # Late: loads TensorFlow.
    import tensorflow as tf
    from tensorflow.python.util import tf_export

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
        "python_estimator": _error(import_module("tensorflow.python.estimator.estimator")),
        "v1_estimator_module": _error(import_module("tensorflow.compat.v1.estimator")),
        "tensorflow_estimator": _error(import_module("tensorflow_estimator")),
        "tf_estimator": _error(lambda: tf.estimator.Estimator),
        "v1_estimator": _error(lambda: tf.compat.v1.estimator.RunConfig),
        "dense": _error(layer("dense")),
        "basic_lstm_cell": _error(layer("BasicLSTMCell")),
        "dense_features": _error(lambda: tf.keras.layers.DenseFeatures),
        "v1_dense_features": _error(lambda: tf.compat.v1.keras.layers.DenseFeatures),
        "sequence_features": _error(lambda: tf.keras.experimental.SequenceFeatures),
        "linear_model": _error(lambda: tf.keras.experimental.LinearModel),
        "keras_estimator": _error(lambda: tf.keras.estimator.model_to_estimator),
        "keras_layer_names": _error(_keras_layers_in_model_fn),
        "keras": tf.keras.__name__ if hasattr(tf.keras, "__name__") else None,
        "estimator_dist_imported": "estimator_dist" in sys.modules,
        "summary_without_tensorboard": _error(_summary_without_tensorboard),  # The last one.
    }
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
