"""A learning-to-rank program as tensorflow_ranking's published Estimator example writes it
(``examples/tf_ranking_tfrecord.py``): lists of examples read by
``tfr.data.build_ranking_dataset`` (example-in-example records), features encoded by
``tfr.feature.encode_listwise_features``, a groupwise scoring function, a ranking head with
a ranking loss and NDCG metrics, ``tfr.model.make_groupwise_ranking_fn``,
``train_and_evaluate`` with a ``LatestExporter``.

    python tests/programs/ranking_estimator.py MODEL_DIR default
    python tests/programs/ranking_estimator.py MODEL_DIR mirrored
    python -m estimator_dist.launch --workers 2 -- \\
        python tests/programs/ranking_estimator.py MODEL_DIR multi_worker

"default" is the program as written: a plain ``RunConfig`` and no estimator_dist line.
Under a strategy the config line becomes ``estimator_dist.make_run_config(STRATEGY, ...)``
and the example's input_fn, which returns ``get_next()`` tensors, is refused in one line
naming it; the user's change is ``dataset_input_fn`` below, which returns the Dataset.

Prints ``REFUSED input_fn <message>`` under a strategy and ``RESULT ranking <json>`` with
the evaluation and the export's directory count.
"""
import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr

LABEL = "relevance"
LIST_SIZE = 4
QUERIES = 64
STEPS = 20


def _example(features):
    feature = {name: tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
               if isinstance(value, float) else
               tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
               for name, value in features.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature))


def _write_eie(path, seed):
    """Example-in-example records: a query context and its LIST_SIZE documents."""
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(QUERIES):
            context = _example({"query_length": float(rng.integers(1, 5))})
            documents = []
            for _ in range(LIST_SIZE):
                score = float(rng.random())
                documents.append(_example({"document_score": score,
                                           LABEL: int(score * 3)}).SerializeToString())
            record = tf.train.Example(features=tf.train.Features(feature={
                "serialized_context": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[context.SerializeToString()])),
                "serialized_examples": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=documents))}))
            writer.write(record.SerializeToString())


def context_feature_columns():
    return {"query_length": tf.feature_column.numeric_column("query_length")}


def example_feature_columns():
    return {"document_score": tf.feature_column.numeric_column("document_score")}


def _feature_specs():
    context = tf.feature_column.make_parse_example_spec(context_feature_columns().values())
    label = tf.feature_column.numeric_column(LABEL, dtype=tf.int64, default_value=-1)
    example = tf.feature_column.make_parse_example_spec(
        list(example_feature_columns().values()) + [label])
    return context, example


def _dataset(path, batch_size, num_epochs):
    context, example = _feature_specs()
    return tfr.data.build_ranking_dataset(
        file_pattern=path, data_format=tfr.data.EIE, batch_size=batch_size,
        list_size=LIST_SIZE, context_feature_spec=context, example_feature_spec=example,
        reader=tf.data.TFRecordDataset, shuffle=False, num_epochs=num_epochs)


def _split_label(features):
    label = tf.squeeze(features.pop(LABEL), axis=2)
    return features, tf.cast(label, tf.float32)


def input_fn(path, batch_size=8, num_epochs=None):
    """The example's input_fn: the dataset's ``get_next()`` tensors."""
    features = tf.compat.v1.data.make_one_shot_iterator(
        _dataset(path, batch_size, num_epochs)).get_next()
    return _split_label(features)


def dataset_input_fn(path, batch_size=8, num_epochs=None):
    """The same input, returning the Dataset."""
    return _dataset(path, batch_size, num_epochs).map(_split_label)


def transform_fn(features, mode):
    context, example = tfr.feature.encode_listwise_features(
        features=features, context_feature_columns=context_feature_columns(),
        example_feature_columns=example_feature_columns(), mode=mode,
        scope="transform_layer")
    return context, example


def score_fn(context_features, group_features, mode, params, config):
    del params, config  # Unused.
    with tf.compat.v1.name_scope("input_layer"):
        inputs = [tf.compat.v1.layers.flatten(group_features[name])
                  for name in sorted(example_feature_columns())]
        inputs += [tf.compat.v1.layers.flatten(context_features[name])
                   for name in sorted(context_feature_columns())]
        layer = tf.concat(inputs, 1)
    layer = tf.compat.v1.layers.batch_normalization(
        layer, training=mode == tf.estimator.ModeKeys.TRAIN)
    layer = tf.compat.v1.layers.dense(layer, units=8, activation=tf.nn.relu)
    return tf.compat.v1.layers.dense(layer, units=1)


def eval_metric_fns():
    return {f"metric/ndcg@{k}": tfr.metrics.make_ranking_metric_fn(
        tfr.metrics.RankingMetricKey.NDCG, topn=k) for k in (1, 3)}


def train_op_fn(loss):
    optimizer = tf.compat.v1.train.AdagradOptimizer(learning_rate=0.1)
    update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    minimize = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.group([minimize, update_ops])


def main(model_dir, strategy):
    if strategy == "default":
        config = tf.estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=10)
    else:
        import estimator_dist
        config = estimator_dist.make_run_config(strategy, model_dir=model_dir,
                                                save_checkpoints_steps=10)
    data = tempfile.mkdtemp()
    train_path, test_path = os.path.join(data, "train.tfrecord"), os.path.join(data, "test")
    _write_eie(train_path, 0)
    _write_eie(test_path, 1)
    head = tfr.head.create_ranking_head(
        loss_fn=tfr.losses.make_loss_fn(tfr.losses.RankingLossKey.APPROX_NDCG_LOSS),
        eval_metric_fns=eval_metric_fns(), train_op_fn=train_op_fn)
    estimator = tf.estimator.Estimator(
        model_fn=tfr.model.make_groupwise_ranking_fn(
            group_score_fn=score_fn, group_size=1, transform_fn=transform_fn,
            ranking_head=head),
        config=config)
    make_input_fn = input_fn
    if strategy != "default":
        try:
            estimator.train(lambda: input_fn(train_path), steps=1)
            raise AssertionError("the get_next() input_fn trained under a strategy")
        except Exception as error:  # noqa: BLE001 - the refusal is what is printed.
            print(f"REFUSED input_fn {type(error).__name__}: {error}", flush=True)
        make_input_fn = dataset_input_fn
    context, example = _feature_specs()
    example.pop(LABEL)
    exporter = tf.estimator.LatestExporter(
        "latest_exporter", serving_input_receiver_fn=(
            tfr.data.build_ranking_serving_input_receiver_fn(
                data_format=tfr.data.EIE, context_feature_spec=context,
                example_feature_spec=example)))
    train_spec = tf.estimator.TrainSpec(lambda: make_input_fn(train_path), max_steps=STEPS)
    eval_spec = tf.estimator.EvalSpec(lambda: make_input_fn(test_path, num_epochs=1),
                                      steps=4, exporters=exporter, start_delay_secs=0,
                                      throttle_secs=0)
    result = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    metrics = result[0] if result else {}
    export_dir = os.path.join(model_dir, "export", "latest_exporter")
    exports = len(os.listdir(export_dir)) if os.path.isdir(export_dir) else 0
    print("RESULT ranking " + json.dumps(
        {**{key: float(value) for key, value in metrics.items()}, "exports": exports,
         "final_step": int(estimator.get_variable_value("global_step"))}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
