"""A character-level RNN text classifier: ``BasicLSTMCell`` + ``dynamic_rnn`` over embedded
characters, ``sequence_length``, ``train_and_evaluate``; the input_fn ignores ``input_context``."""
import numpy as np
import tensorflow.compat.v1 as tf

MAX_LENGTH = 12
VOCAB = 32
BATCH_SIZE = 16
TRAIN_STEPS = 20


def _data(count, seed):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 2, size=count).astype(np.int32)
    lengths = rng.randint(4, MAX_LENGTH + 1, size=count).astype(np.int32)
    offset = labels[:, None] * (VOCAB // 2 - 1)
    chars = rng.randint(1, VOCAB // 2, size=(count, MAX_LENGTH)) + offset
    chars[np.arange(MAX_LENGTH)[None, :] >= lengths[:, None]] = 0
    return {"chars": chars.astype(np.int32), "length": lengths}, labels


def input_fn(features, labels, training):
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    if training:
        dataset = dataset.shuffle(200).repeat()
    return dataset.batch(BATCH_SIZE)


def rnn_model_fn(features, labels, mode, params):
    embeddings = tf.get_variable("embeddings", [VOCAB, params["embed_dim"]])
    inputs = tf.nn.embedding_lookup(embeddings, features["chars"])
    cell = tf.nn.rnn_cell.BasicLSTMCell(params["num_units"])
    _, state = tf.nn.dynamic_rnn(cell, inputs, sequence_length=features["length"],
                                 dtype=tf.float32)
    logits = tf.layers.dense(state.h, 2)
    predicted = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"class": predicted})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=train_op,
        eval_metric_ops={"accuracy": tf.metrics.accuracy(labels, predicted)})


def main(make_config, model_dir):
    train_features, train_labels = _data(256, 0)
    test_features, test_labels = _data(64, 1)
    classifier = tf.estimator.Estimator(
        rnn_model_fn, config=make_config(model_dir=model_dir, tf_random_seed=1),
        params={"embed_dim": 8, "num_units": 16})
    train_spec = tf.estimator.TrainSpec(lambda: input_fn(train_features, train_labels, True),
                                        max_steps=TRAIN_STEPS)
    eval_spec = tf.estimator.EvalSpec(lambda: input_fn(test_features, test_labels, False),
                                      start_delay_secs=0, throttle_secs=0)
    result = tf.estimator.train_and_evaluate(classifier, train_spec, eval_spec)
    metrics = result[0] if result else {}
    metrics["final_step"] = classifier.get_variable_value("global_step")
    return metrics
