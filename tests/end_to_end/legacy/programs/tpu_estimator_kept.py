"""A TPUEstimator program in the shape of tensorflow/tpu's ``mnist_tpu.py``, kept as
written: ``model_fn`` returning ``TPUEstimatorSpec`` (``CrossShardOptimizer`` on TPU,
``eval_metrics=(metric_fn, [labels, logits])``), an input_fn reading
``params["batch_size"]``, and its own ``tf.estimator.tpu.TPUEstimator(...)`` constructor
with separate train, eval and predict batch sizes. Only the config line changed (the
script's ``tf.estimator.tpu.RunConfig(...)``); under a strategy other than "tpu" the
constructor builds what ``estimator_dist.make_estimator`` builds."""
import numpy as np
import tensorflow.compat.v1 as tf

USE_TPU = False  # The script's --use_tpu flag.
TRAIN_BATCH_SIZE = 16
EVAL_BATCH_SIZE = 8
PREDICT_BATCH_SIZE = 4
TRAIN_STEPS = 20


def metric_fn(labels, logits):
    accuracy = tf.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, axis=1))
    return {"accuracy": accuracy}


def model_fn(features, labels, mode, params):
    """model_fn constructs the ML model used to predict handwritten digits."""
    del params
    image = features
    if isinstance(image, dict):
        image = features["image"]
    hidden = tf.layers.dense(image, 32, activation=tf.nn.relu)
    logits = tf.layers.dense(hidden, 3)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {"class_ids": tf.argmax(logits, axis=1),
                       "probabilities": tf.nn.softmax(logits)}
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss,
                                                 eval_metrics=(metric_fn, [labels, logits]))
    optimizer = tf.train.GradientDescentOptimizer(learning_rate=0.05)
    if USE_TPU:
        optimizer = tf.tpu.CrossShardOptimizer(optimizer)
    return tf.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=loss,
        train_op=optimizer.minimize(loss, tf.train.get_global_step()))


def _data(count, seed):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 3, size=count).astype(np.int32)
    images = (rng.rand(count, 12) + labels[:, None]).astype(np.float32)
    return images, labels


def make_input_fn(images, labels, training):
    def input_fn(params):
        """Read the data; TPUEstimator gives each shard its batch_size in params."""
        batch_size = params["batch_size"]
        dataset = tf.data.Dataset.from_tensor_slices((images, labels))
        if training:
            dataset = dataset.cache().repeat().shuffle(buffer_size=200)
        return dataset.batch(batch_size, drop_remainder=True)

    return input_fn


def main(make_config, model_dir):
    run_config = make_config(model_dir=model_dir, save_checkpoints_steps=TRAIN_STEPS,
                             tf_random_seed=1)
    estimator = tf.estimator.tpu.TPUEstimator(
        model_fn=model_fn, use_tpu=USE_TPU, train_batch_size=TRAIN_BATCH_SIZE,
        eval_batch_size=EVAL_BATCH_SIZE, predict_batch_size=PREDICT_BATCH_SIZE,
        params={"data_dir": "synthetic"}, config=run_config)
    estimator.train(input_fn=make_input_fn(*_data(128, 0), True), max_steps=TRAIN_STEPS)
    result = estimator.evaluate(input_fn=make_input_fn(*_data(32, 1), False),
                                steps=32 // EVAL_BATCH_SIZE)
    images, labels = _data(PREDICT_BATCH_SIZE, 2)
    prediction = next(estimator.predict(
        input_fn=lambda params: make_input_fn(images, labels, False)(params).map(
            lambda x, y: x)))
    result["probabilities_sum"] = float(np.sum(prediction["probabilities"]))
    return result
