"""A TPUEstimator program in the shape of google-research/bert ``run_classifier.py``:
``model_fn_builder`` / ``input_fn_builder``, ``TPUEstimatorSpec`` with ``scaffold_fn`` and
``eval_metrics=(metric_fn, tensors)``, an input_fn that reads ``params["batch_size"]``, a
``CrossShardOptimizer`` when on TPU. The Estimator comes from ``estimator_dist.make_estimator``
(where the script built ``TPUEstimator(use_tpu=..., train_batch_size=...)``)."""
import numpy as np
import tensorflow.compat.v1 as tf

import estimator_dist

SEQ_LENGTH = 8
VOCAB_SIZE = 20
TRAIN_BATCH_SIZE = 16
EVAL_BATCH_SIZE = 16
NUM_TRAIN_STEPS = 20


def create_model(input_ids, input_mask, labels, num_labels, hidden_size):
    embedding_table = tf.get_variable(
        "word_embeddings", [VOCAB_SIZE, hidden_size],
        initializer=tf.truncated_normal_initializer(stddev=0.02))
    embedded = tf.nn.embedding_lookup(embedding_table, input_ids)
    mask = tf.cast(input_mask, tf.float32)[:, :, None]
    pooled = tf.reduce_sum(embedded * mask, axis=1) / tf.reduce_sum(mask, axis=1)
    pooled = tf.layers.dense(pooled, hidden_size, activation=tf.tanh, name="pooler")
    output_weights = tf.get_variable(
        "output_weights", [num_labels, hidden_size],
        initializer=tf.truncated_normal_initializer(stddev=0.02))
    output_bias = tf.get_variable("output_bias", [num_labels], initializer=tf.zeros_initializer())
    logits = tf.nn.bias_add(tf.matmul(pooled, output_weights, transpose_b=True), output_bias)
    probabilities = tf.nn.softmax(logits, axis=-1)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    one_hot_labels = tf.one_hot(labels, depth=num_labels, dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
    loss = tf.reduce_mean(per_example_loss)
    return loss, per_example_loss, logits, probabilities


def model_fn_builder(num_labels, learning_rate, use_tpu):
    """Returns `model_fn` closure for TPUEstimator."""

    def model_fn(features, labels, mode, params):
        del labels, params  # Unused, as in run_classifier.py.
        input_ids = features["input_ids"]
        input_mask = features["input_mask"]
        label_ids = features["label_ids"]
        total_loss, per_example_loss, logits, probabilities = create_model(
            input_ids, input_mask, label_ids, num_labels, hidden_size=16)
        scaffold_fn = None
        if mode == tf.estimator.ModeKeys.TRAIN:
            optimizer = tf.train.AdamOptimizer(learning_rate)
            if use_tpu:
                optimizer = tf.tpu.CrossShardOptimizer(optimizer)
            train_op = optimizer.minimize(total_loss, global_step=tf.train.get_global_step())
            return tf.estimator.tpu.TPUEstimatorSpec(
                mode=mode, loss=total_loss, train_op=train_op, scaffold_fn=scaffold_fn)
        if mode == tf.estimator.ModeKeys.EVAL:

            def metric_fn(per_example_loss, label_ids, logits):
                predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
                accuracy = tf.metrics.accuracy(labels=label_ids, predictions=predictions)
                loss = tf.metrics.mean(values=per_example_loss)
                return {"eval_accuracy": accuracy, "eval_loss": loss}

            eval_metrics = (metric_fn, [per_example_loss, label_ids, logits])
            return tf.estimator.tpu.TPUEstimatorSpec(
                mode=mode, loss=total_loss, eval_metrics=eval_metrics, scaffold_fn=scaffold_fn)
        return tf.estimator.tpu.TPUEstimatorSpec(
            mode=mode, predictions={"probabilities": probabilities}, scaffold_fn=scaffold_fn)

    return model_fn


def _examples(count, seed):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 2, size=count).astype(np.int32)
    ids = rng.randint(1, VOCAB_SIZE // 2, size=(count, SEQ_LENGTH)) + labels[:, None] * 9
    lengths = rng.randint(3, SEQ_LENGTH + 1, size=count)
    mask = (np.arange(SEQ_LENGTH)[None, :] < lengths[:, None]).astype(np.int32)
    return {"input_ids": (ids * mask).astype(np.int32), "input_mask": mask, "label_ids": labels}


def input_fn_builder(features, is_training, drop_remainder):
    """Creates an `input_fn` closure to be passed to TPUEstimator."""

    def input_fn(params):
        batch_size = params["batch_size"]
        d = tf.data.Dataset.from_tensor_slices(features)
        if is_training:
            d = d.repeat()
            d = d.shuffle(buffer_size=100)
        return d.batch(batch_size=batch_size, drop_remainder=drop_remainder)

    return input_fn


def main(make_config, model_dir):
    run_config = make_config(model_dir=model_dir, save_checkpoints_steps=NUM_TRAIN_STEPS,
                             tf_random_seed=1)
    use_tpu = getattr(run_config, "use_tpu", False)
    estimator = estimator_dist.make_estimator(
        model_fn_builder(num_labels=2, learning_rate=0.01, use_tpu=use_tpu), run_config,
        batch_size=TRAIN_BATCH_SIZE)
    estimator.train(input_fn=input_fn_builder(_examples(128, 0), True, True),
                    max_steps=NUM_TRAIN_STEPS)
    result = estimator.evaluate(input_fn=input_fn_builder(_examples(64, 1), False, True),
                                steps=64 // EVAL_BATCH_SIZE)
    predictions = estimator.predict(input_fn=input_fn_builder(_examples(16, 2), False, True))
    result["probabilities_sum"] = float(np.sum(next(predictions)["probabilities"]))
    return result
