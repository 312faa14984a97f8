"""One worker of a two-worker census-style wide-and-deep job that counts the collectives
its training steps run; run as a module with TF_CONFIG set.

    python -m tests.programs.census_rounds_job MODEL_DIR STEPS BYTES_PER_PACK

In the style of the ML-engine census trainer: a canned ``DNNLinearCombinedClassifier``
whose linear part (FTRL) reads three crossed columns of 10,000, 1,000,000 and 10,000
buckets and a hashed column, and whose DNN part (Adagrad, 100-70-50-25 units) reads an
embedding of a hashed column, an embedding of a six-word vocabulary, an indicator of an
identity column and two numeric columns; batch 40, ``train_and_evaluate`` over a finite
input. BYTES_PER_PACK: ``make_run_config``'s ``all_reduce_bytes_per_pack`` (0: TensorFlow's
default, one all-reduce for all of a reduction's dense gradients; 1: one per gradient).

Prints ``COLLECTIVES {json}``: the collective ops of the training graph by type, and for
each traced step after the first few, the collectives that ran in it by type and by name
scope; then ``FINISHED``.
"""
import collections
import json
import os
import sys

import numpy as np
import tensorflow as tf

import estimator_dist

BATCH = 40
TRACED = (3, 4, 5)  # Steps traced (the first steps set the rows' guesses).
COLLECTIVE_TYPES = ("CollectiveReduceV2", "CollectiveGatherV2", "CollectiveBcastSendV2",
                    "CollectiveBcastRecvV2", "CollectiveReduce", "CollectiveGather")
OCCUPATIONS = 400
VOCABULARY = ("Husband", "Not-in-family", "Own-child", "Unmarried", "Wife", "Other-relative")


def columns():
    """(linear columns, DNN columns) of the census trainer's kinds."""
    fc = tf.feature_column
    age = fc.numeric_column("age")
    hours = fc.numeric_column("hours_per_week")
    education = fc.categorical_column_with_identity("education", 16)
    occupation = fc.categorical_column_with_hash_bucket("occupation", 1000, dtype=tf.int64)
    country = fc.categorical_column_with_hash_bucket("native_country", 1000, dtype=tf.int64)
    relationship = fc.categorical_column_with_vocabulary_list("relationship", VOCABULARY)
    age_buckets = fc.bucketized_column(age, [18, 25, 30, 35, 40, 45, 50, 55, 60, 65])
    linear = [fc.crossed_column(["education", "occupation"], 10_000),
              fc.crossed_column([age_buckets, "education", "occupation"], 1_000_000),
              fc.crossed_column(["native_country", "occupation"], 10_000),
              country]
    deep = [fc.embedding_column(occupation, 8), fc.embedding_column(relationship, 8),
            fc.indicator_column(education), age, hours]
    return linear, deep


def input_fn(worker, rows):
    """A finite input of ``rows`` census-like rows, each worker its own, batches of 40."""
    rng = np.random.default_rng(worker)
    features = {
        "age": rng.integers(17, 90, (rows, 1)).astype(np.float32),
        "hours_per_week": rng.integers(1, 99, (rows, 1)).astype(np.float32),
        "education": rng.integers(0, 16, (rows, 1)).astype(np.int64),
        "occupation": rng.integers(0, OCCUPATIONS, (rows, 1)).astype(np.int64),
        "native_country": rng.integers(0, 40, (rows, 1)).astype(np.int64),
        "relationship": rng.choice(VOCABULARY, (rows, 1)),
    }
    labels = (features["education"] + features["occupation"]) % 2
    return lambda: tf.data.Dataset.from_tensor_slices((features, labels)).batch(
        BATCH, drop_remainder=True)


def _op_type(label):
    """The op type in a step-stats node's timeline label ("name = Type(inputs)")."""
    return label.partition(" = ")[2].split("(", 1)[0]


class CollectiveCensus(tf.compat.v1.train.SessionRunHook):
    """Counts the collective ops of the graph (``begin``) and, from a full trace of the
    steps ``TRACED``, those that ran in each step."""

    def __init__(self):
        self.graph_counts = {}
        self.steps = []
        self._step = 0

    def begin(self):
        graph = tf.compat.v1.get_default_graph()
        counts = collections.Counter(op.type for op in graph.get_operations()
                                     if op.type in COLLECTIVE_TYPES)
        self.graph_counts = dict(counts)

    def before_run(self, run_context):
        self._step += 1
        if self._step not in TRACED:
            return None
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        return tf.compat.v1.train.SessionRunArgs(None, options=options)

    def after_run(self, run_context, run_values):
        if self._step not in TRACED:
            return
        by_type, by_scope = collections.Counter(), collections.Counter()
        for device in run_values.run_metadata.step_stats.dev_stats:
            for node in device.node_stats:
                kind = _op_type(node.timeline_label)
                if kind in COLLECTIVE_TYPES:
                    by_type[kind] += 1
                    by_scope[node.node_name.rpartition("/")[0]] += 1
        self.steps.append({"types": dict(by_type), "scopes": dict(by_scope)})


def main(model_dir, steps, bytes_per_pack):
    worker = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    config = estimator_dist.make_run_config(
        "multi_worker", model_dir=model_dir, collective_timeout=60, tf_random_seed=1,
        all_reduce_bytes_per_pack=bytes_per_pack, save_checkpoints_steps=steps)
    linear, deep = columns()
    estimator = tf.estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=linear, linear_optimizer="Ftrl",
        dnn_feature_columns=deep, dnn_optimizer="Adagrad",
        dnn_hidden_units=[100, 70, 50, 25], config=config)
    census = CollectiveCensus()
    # One batch more than the steps: the finite input ends after the last step.
    train = tf.estimator.TrainSpec(input_fn(worker, BATCH * (steps + 1)), max_steps=steps,
                                   hooks=[census])
    evaluation = tf.estimator.EvalSpec(input_fn(worker, BATCH), steps=1)
    tf.estimator.train_and_evaluate(estimator, train, evaluation)
    print("COLLECTIVES " + json.dumps({"graph": census.graph_counts, "steps": census.steps}),
          flush=True)
    print("FINISHED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
