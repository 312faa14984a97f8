"""tensorflow/models ``custom_estimator.py``: feature columns, tf.layers, tf.losses, tf.metrics;
train, evaluate and predict; input_fns that ignore ``input_context``."""
import tensorflow.compat.v1 as tf

from tests.end_to_end.legacy.programs import iris_data

BATCH_SIZE = 16
TRAIN_STEPS = 20


def my_model(features, labels, mode, params):
    """DNN with two hidden layers."""
    net = tf.feature_column.input_layer(features, params["feature_columns"])
    for units in params["hidden_units"]:
        net = tf.layers.dense(net, units=units, activation=tf.nn.relu)
    logits = tf.layers.dense(net, params["n_classes"], activation=None)
    predicted_classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {
            "class_ids": predicted_classes[:, tf.newaxis],
            "probabilities": tf.nn.softmax(logits),
            "logits": logits,
        }
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    accuracy = tf.metrics.accuracy(labels=labels, predictions=predicted_classes, name="acc_op")
    metrics = {"accuracy": accuracy}
    tf.summary.scalar("accuracy", accuracy[1])
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    assert mode == tf.estimator.ModeKeys.TRAIN
    optimizer = tf.train.AdagradOptimizer(learning_rate=0.1)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(make_config, model_dir):
    (train_x, _), _ = iris_data.load_data()
    my_feature_columns = [tf.feature_column.numeric_column(key=key) for key in train_x.keys()]
    classifier = tf.estimator.Estimator(
        model_fn=my_model,
        config=make_config(model_dir=model_dir, tf_random_seed=1),
        params={"feature_columns": my_feature_columns, "hidden_units": [10, 10], "n_classes": 3})
    return iris_data.train_evaluate_predict(classifier, BATCH_SIZE, TRAIN_STEPS)
