"""Embedding lookups read the rows a batch touches, not the whole table.

Plain TensorFlow reads (and, once a sparse update has touched the table, copies) every
embedding table in full at every step: Grappler rewrites the lookup's gather into a read
of the variable on one device, and ``embedding_lookup_sparse`` converts a mirrored
variable to a tensor. ``estimator_dist.mends.embedding_rows`` keeps the gather. A traced
step shows which ops output a tensor of the table's shape.
"""
import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist.mends import embedding_rows
from tests.support import assert_passes_under_tf1_behaviour

v1 = tf.compat.v1
VOCAB, DIM, BATCH = 5000, 8, 64


def _whole_table_reads(run_metadata, shape):
    """The executed ops that output a tensor of ``shape``, the table's."""
    return sorted({node.node_name for device in run_metadata.step_stats.dev_stats
                   for node in device.node_stats for output in node.output
                   if [d.size for d in output.tensor_description.shape.dim] == list(shape)})


def _traced_lookup_steps(steps=3):
    """``safe_embedding_lookup_sparse`` of a resource variable trained by Adagrad: the
    reads of a traced step after ``steps`` steps, and the table then."""
    rng = np.random.default_rng(0)
    with tf.Graph().as_default():
        v1.set_random_seed(7)
        table = v1.get_variable("table", [VOCAB, DIM], use_resource=True)
        ids = v1.placeholder(tf.int64, [BATCH])
        sparse = tf.SparseTensor(
            tf.stack([tf.range(BATCH, dtype=tf.int64), tf.zeros([BATCH], tf.int64)], 1),
            ids, [BATCH, 1])
        looked_up = v1.nn.safe_embedding_lookup_sparse(table, sparse, combiner="mean")
        train = v1.train.AdagradOptimizer(0.5).minimize(tf.reduce_sum(looked_up ** 2))
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            for _ in range(steps):
                session.run(train, {ids: rng.integers(0, VOCAB // 10, BATCH)})
            metadata = v1.RunMetadata()
            session.run(train, {ids: rng.integers(0, VOCAB // 10, BATCH)},
                        options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE),
                        run_metadata=metadata)
            return _whole_table_reads(metadata, [VOCAB, DIM]), session.run(table)


def test_tf_lookup_reads_the_whole_table_every_step(embedding_lookups):
    """Plain TF: the sparsely updated table is read whole in a step (Grappler's rewrite)."""
    embedding_lookups(mended=False)
    reads, _ = _traced_lookup_steps()
    assert any("SimplifyEmbeddingLookupStage" in name for name in reads), reads


def test_mended_lookup_reads_only_rows_and_gives_the_same_table(embedding_lookups):
    embedding_lookups(mended=False)
    _, plain_table = _traced_lookup_steps()
    embedding_lookups(mended=True)
    reads, table = _traced_lookup_steps()
    assert reads == []
    np.testing.assert_allclose(table, plain_table, rtol=0, atol=1e-6)


def test_mended_lookup_takes_ragged_and_numpy_ids(embedding_lookups):
    """Ids that are not a graph tensor reach TensorFlow's lookup as they are."""
    embedding_lookups(mended=True)
    with tf.Graph().as_default():
        table = v1.get_variable("table", initializer=np.arange(12.0).reshape(6, 2),
                                use_resource=True)
        ragged = tf.nn.embedding_lookup(table, tf.ragged.constant([[1, 2], [5]]))
        listed = tf.nn.embedding_lookup(table, np.array([0, 3]))
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            ragged, listed = session.run([ragged.flat_values, listed])
    np.testing.assert_array_equal(ragged, [[2, 3], [4, 5], [10, 11]])
    np.testing.assert_array_equal(listed, [[0, 1], [6, 7]])


def test_make_run_config_installs_it_and_uninstall_restores_tf(embedding_lookups):
    embedding_lookups(mended=False)
    assert not embedding_rows.installed()
    estimator_dist.make_run_config("default")
    assert embedding_rows.installed()
    embedding_rows.uninstall()
    from tensorflow.python.ops import embedding_ops
    assert embedding_ops.embedding_lookup is tf.compat.v1.nn.embedding_lookup


# ---- a canned wide-and-deep Estimator, one device and mirrored ------------------------

def _input_fn():  # ignores input_context, as legacy input_fns do
    rng = np.random.default_rng(1)
    features = {"a": rng.integers(0, 50, (1024, 1)), "b": rng.integers(0, 50, (1024, 1)),
                "c": rng.integers(0, VOCAB, (1024, 1))}
    labels = (features["a"] + features["c"]) % 2
    return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(BATCH)


class _TraceStep(tf.estimator.SessionRunHook):
    """Traces run ``at`` and keeps the names of its ops that output a table's shape."""

    def __init__(self, at, shapes):
        self._at, self._shapes, self._runs, self.reads = at, shapes, 0, None

    def before_run(self, run_context):
        self._runs += 1
        if self._runs == self._at:
            return tf.estimator.SessionRunArgs(
                {}, options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE))
        return None

    def after_run(self, run_context, run_values):
        if self._runs == self._at:
            self.reads = [name for shape in self._shapes
                          for name in _whole_table_reads(run_values.run_metadata, shape)]


def _train_wide_and_deep(model_dir, config):
    columns = tf.feature_column
    crossed = columns.crossed_column(["a", "b"], hash_bucket_size=20_000)
    embedded = columns.embedding_column(columns.categorical_column_with_identity("c", VOCAB),
                                        DIM)
    estimator = tf.estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=[crossed], dnn_feature_columns=[embedded],
        dnn_hidden_units=[16], config=config.replace(model_dir=str(model_dir)))
    trace = _TraceStep(at=5, shapes=[[VOCAB, DIM], [20_000, 1]])
    estimator.train(_input_fn, max_steps=6, hooks=[trace])
    checkpoint = tf.train.load_checkpoint(str(model_dir))
    weights = {name: checkpoint.get_tensor(name)
               for name in checkpoint.get_variable_to_shape_map()
               if "c_embedding/embedding_weights" in name or "a_X_b/weights" in name}
    return trace.reads, weights


def _plain_config(strategy):
    if strategy == "default":
        return tf.estimator.RunConfig(tf_random_seed=3)
    mirrored = tf.distribute.MirroredStrategy(
        ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())
    return tf.estimator.RunConfig(tf_random_seed=3, train_distribute=mirrored)


def _package_config(strategy):
    options = {"num_replicas": 2} if strategy == "mirrored" else {}
    return estimator_dist.make_run_config(strategy, tf_random_seed=3, **options)


@pytest.mark.slow
@pytest.mark.both_ends
@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_canned_wide_and_deep_reads_rows_and_trains_as_plain_tf(tmp_path, strategy,
                                                               embedding_lookups):
    """Config line changed only: the package's step reads no table whole; plain TF's reads
    both (the embedding and the crossed column's weights) on every replica, through
    Grappler's rewrite on one device and through embedding_lookup_sparse's conversion of
    the mirrored variable under mirrored; the tables trained over six steps are the same
    within 1e-6."""
    embedding_lookups(mended=False)
    plain_reads, plain = _train_wide_and_deep(tmp_path / "plain", _plain_config(strategy))
    config = _package_config(strategy)  # installs the mend
    assert embedding_rows.installed()
    reads, weights = _train_wide_and_deep(tmp_path / "package", config)
    read_by = ("ArithmeticOptimizer/SimplifyEmbeddingLookupStage_ReadVar"
               if strategy == "default" else "embedding_lookup_sparse/ReadVariableOp")
    replicas = 1 if strategy == "default" else 2
    assert len([name for name in plain_reads if read_by in name]) == 2 * replicas, plain_reads
    assert reads == []
    assert sorted(weights) == sorted(plain)
    assert len([name for name in weights if "replica_" not in name]) == 5  # tables, slots
    for name, value in weights.items():
        np.testing.assert_allclose(value, plain[name], rtol=0, atol=1e-6, err_msg=name)


@pytest.mark.slow
@pytest.mark.both_ends
@pytest.mark.timeout(460)  # Above the rerun's own limit: a slow rerun fails, with its output.
def test_module_under_tf1_behaviour():
    """The same, with ``disable_v2_behavior()`` first."""
    assert_passes_under_tf1_behaviour(__file__, "-k", "not under_tf1", timeout=400)
