"""Shared pieces of the model_fns: losses, metrics, optimizers and the EstimatorSpec."""
import tensorflow as tf

v1 = tf.compat.v1

_OPTIMIZERS = {
    "sgd": v1.train.GradientDescentOptimizer,
    "adam": v1.train.AdamOptimizer,
    "adagrad": v1.train.AdagradOptimizer,
}


def make_optimizer(name, learning_rate):
    try:
        return _OPTIMIZERS[name](learning_rate)
    except KeyError:
        raise ValueError(f"optimizer must be one of {', '.join(sorted(_OPTIMIZERS))}. "
                         f"Received: optimizer={name!r}") from None


def classification_spec(mode, logits, labels, params, predictions=None):
    """The EstimatorSpec of a softmax classifier over ``logits``."""
    probabilities = tf.nn.softmax(logits)
    classes = tf.argmax(logits, axis=-1)
    outputs = {"logits": logits, "probabilities": probabilities, "classes": classes}
    outputs.update(predictions or {})
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=outputs, export_outputs={
            "serving_default": tf.estimator.export.PredictOutput(outputs)})
    labels = tf.cast(tf.reshape(labels, [-1]), tf.int64)
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        metrics = {"accuracy": v1.metrics.accuracy(labels, classes)}
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    optimizer = make_optimizer(params.get("optimizer", "adam"), params["learning_rate"])
    with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
        train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
