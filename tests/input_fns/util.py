"""Helpers for the input_fns tests: eager iteration and small files."""
import numpy as np
import tensorflow as tf


def context(num_pipelines, pipeline_id, num_replicas=None):
    return tf.distribute.InputContext(num_pipelines, pipeline_id,
                                      num_replicas or num_pipelines)


def labels_seen(input_fn, input_context=None):
    """Every label value the input_fn yields in one finite pass, in order."""
    return [int(v) for _, labels in input_fn(input_context) for v in labels.numpy()]


def labels_seen_in_graph(input_fn, input_context=None):
    """``labels_seen`` with the dataset built in a TF1 graph, the way Estimator builds it."""
    with tf.Graph().as_default():
        labels = tf.compat.v1.data.make_one_shot_iterator(input_fn(input_context)).get_next()[1]
        seen = []
        with tf.compat.v1.Session() as session:
            try:
                while True:
                    seen.extend(int(v) for v in session.run(labels))
            except tf.errors.OutOfRangeError:
                return seen


def shards(input_fn, num_pipelines):
    """The labels each of ``num_pipelines`` pipelines (one replica each) reads."""
    return [labels_seen(input_fn, context(num_pipelines, i)) for i in range(num_pipelines)]


def assert_disjoint_cover(parts, expected):
    flat = [v for part in parts for v in part]
    assert all(parts), f"an empty shard: {[len(p) for p in parts]}"
    assert sorted(flat) == sorted(expected), "shards overlap or miss rows"


def example(**features):
    """A serialized tf.train.Example from lists of floats, ints or bytes."""
    feature = {}
    for key, values in features.items():
        values = np.asarray(values).reshape(-1)
        if values.dtype.kind == "f":
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_records(path, records):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def record_offsets(path):
    """Byte offset where each record of an uncompressed TFRecord file starts."""
    offsets, offset = [], 0
    for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        offsets.append(offset)
        offset += len(record) + 16
    return offsets
