"""Serving input receivers and SavedModel export."""
import tensorflow as tf

v1 = tf.compat.v1


def serving_input_receiver_fn(feature_shapes):
    """A receiver with one float32 placeholder per feature.

    Args:
      feature_shapes: feature name -> shape, ``None`` for a dimension that varies from
        call to call (the batch, an LSTM's time axis).
    """

    def receiver_fn():
        inputs = {name: v1.placeholder(tf.float32, shape, name=name)
                  for name, shape in feature_shapes.items()}
        return tf.estimator.export.ServingInputReceiver(inputs, inputs)

    return receiver_fn


def export_saved_model(estimator, export_dir_base, feature_shapes):
    """Exports the latest checkpoint; returns the SavedModel's path as a str."""
    path = estimator.export_saved_model(export_dir_base,
                                        serving_input_receiver_fn(feature_shapes))
    return path.decode() if isinstance(path, bytes) else path
