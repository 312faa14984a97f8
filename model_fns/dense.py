"""``dense_classifier_model_fn``: a feed-forward softmax classifier."""
import tensorflow as tf

from model_fns import _heads

v1 = tf.compat.v1


def dense_classifier_model_fn(features, labels, mode, params):
    """A dense classifier over feature ``x`` float [batch, dim].

    params: ``hidden_units`` (list of ints), ``num_classes``, ``learning_rate``,
    ``optimizer`` ("adam").
    """
    net = tf.cast(features["x"], tf.float32)
    for i, units in enumerate(params["hidden_units"]):
        net = v1.layers.dense(net, units, activation=tf.nn.relu, name=f"hidden_{i}")
    logits = v1.layers.dense(net, params["num_classes"], name="logits")
    return _heads.classification_spec(mode, logits, labels, params)
