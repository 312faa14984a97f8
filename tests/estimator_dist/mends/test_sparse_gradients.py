"""Sparse gradients under "multi_worker": exchanged as rows, trained as the dense
reduction trains (mend ``sparse_gradients``)."""
import concurrent.futures
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.distribute import cross_device_ops as cross_device_ops_lib
from tensorflow.python.distribute import values as values_lib
from tensorflow.python.ops import control_flow_util

from estimator_dist.supervisor.tasks import free_ports
from estimator_dist.mends import sparse_gradients
from tests.support import run_workers

STEPS = 6


def test_ladder_pads_a_count_by_at_most_a_fifth_and_ends_at_the_limit():
    sizes = sparse_gradients.ladder(25_000)
    assert sizes[0] == 1 and sizes[-1] == 25_000
    assert sizes == sorted(set(sizes))
    for count in (1, 2, 7, 100, 1_000, 24_999):
        padded = next(size for size in sizes if size >= count)
        assert padded <= max(count + 1, count * 1.19 + 1)


@pytest.mark.parametrize("workers,expected", [(2, 25_000), (4, 12_500)])
def test_rows_limit_is_dense_bytes_over_row_bytes_times_replicas(workers, expected):
    plan = sparse_gradients._Plan("w", (100_000, 1), tf.float32, workers, "auto")
    assert plan.max_rows == expected  # 400,000 B dense / (8 B a row x replicas)


def test_small_table_stays_dense_and_rows_mode_sends_rows():
    small = sparse_gradients._Plan("w", (16, 3), tf.float32, 2, "auto")
    assert small.max_rows == 0 and "dense" in small.describe()
    assert sparse_gradients._Plan("w", (16, 3), tf.float32, 2, "rows").max_rows == 16


REPLICA_DEVICE = "/job:worker/replica:0/task:0/device:CPU:0"


def test_densified_gradient_keeps_its_values_device_so_the_batch_packs():
    """TensorFlow compares a per-replica value's device strings as they are: a dense
    gradient made under the merge call's device scope ("/job:worker/task:0") does not
    match its variable's device, and the batch all-reduces each gradient on its own. The
    mend makes it on its values' device: the batch matches and packs."""
    with tf.Graph().as_default():
        with tf.device(REPLICA_DEVICE):
            slices = tf.IndexedSlices(tf.ones([2, 3]), tf.constant([0, 4]), tf.constant([5, 3]))
            kernel = tf.ones([3, 3])
        with tf.device("/job:worker/task:0"):
            plain = tf.convert_to_tensor(slices)
            mended = sparse_gradients._densified(slices)
        assert mended.device == REPLICA_DEVICE

        def batch(dense):
            return [(values_lib.PerReplica((value,)), REPLICA_DEVICE) for value in (dense, kernel)]

        assert not cross_device_ops_lib._all_devices_match(batch(plain))
        assert cross_device_ops_lib._all_devices_match(batch(mended))


def _unique_ops(graph):
    return sum(op.type in ("Unique", "UniqueV2") for op in graph.get_operations())


@pytest.mark.parametrize("lookup", ["tensorflow", "embedding_rows"])
def test_a_lookups_gradient_crosses_its_rows_without_another_unique(lookup, embedding_lookups):
    """An embedding lookup's gradient carries the distinct ids of its ``Unique`` (through
    the gather's gradient, and the ``embedding_rows`` mend's snapshot): its rows go as
    they are; indices of unknown origin get their duplicates summed."""
    embedding_lookups(mended=lookup == "embedding_rows")
    with tf.Graph().as_default() as graph:
        table = tf.compat.v1.get_variable("table", [100, 4], use_resource=True)
        ids = tf.SparseTensor([[0, 0], [1, 0], [2, 0]], tf.constant([7, 3, 7], tf.int64),
                              [3, 1])
        looked_up = tf.compat.v1.nn.safe_embedding_lookup_sparse(table, ids)
        gradient = tf.compat.v1.gradients(tf.reduce_sum(looked_up), table)[0]
        plan = sparse_gradients._Plan("table", (100, 4), tf.float32, 2, "rows")
        before = _unique_ops(graph)
        rows = sparse_gradients._Rows(gradient, plan)
        assert _unique_ops(graph) == before
        repeated = sparse_gradients._Rows(
            tf.IndexedSlices(tf.ones([3, 4]), tf.constant([7, 3, 7])), plan)
        assert _unique_ops(graph) == before + 1
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            indices, repeated_indices, repeated_values = session.run(
                [rows.indices, repeated.indices, repeated.values])
    assert sorted(indices) == [3, 7]
    assert list(repeated_indices) == [7, 3]
    np.testing.assert_array_equal(repeated_values, [[2] * 4, [1] * 4])


class _TwinCollectives:
    """The collectives of a replica whose one peer sends what it sends: an all-gather
    repeats the tensor, an all-reduce adds it twice (MAX: itself). Each call's kind,
    instance key and size are kept, to fetch, and ``gathers`` counts the all-gathers
    that ran."""

    group_size = 2
    device = "/cpu:0"

    def __init__(self):
        self._keys = iter(range(100, 10**6))
        self.calls = []
        self.gathers = tf.Variable(0)

    def key(self):
        return next(self._keys)

    def all_reduce(self, tensor, instance_key, merge_op="Add"):
        self.calls.append(("all_reduce", instance_key, tf.size(tensor)))
        return tensor if merge_op == "Max" else tensor * 2

    def all_gather(self, tensor, instance_key):
        self.calls.append(("all_gather", instance_key, tf.size(tensor)))
        with tf.control_dependencies([self.gathers.assign_add(1)]):
            return tf.concat([tensor, tensor], 0)


# Per step: ids of the embedding lookup, rows of the fed IndexedSlices.
_STEPS = ((7, 5), (6, 4), (300, 1_000), (3, 30_000), (40, 2))


def _tables():
    """Three tables' gradients as one replica's ``_Rows``, and the feeds of five steps:
    a ``tf.gather`` of 6 static ids, an embedding lookup (``sparse_gradient``) of fed ids
    and a fed ``IndexedSlices`` whose count goes above its rule (25,000 rows) in step 4."""
    v1 = tf.compat.v1
    gathered = v1.get_variable("gathered", [40, 3])
    embedded = v1.get_variable("embedded", [50_000, 4])
    ids = v1.placeholder(tf.int64, [None])
    loss = (tf.reduce_sum(tf.gather(gathered, tf.constant([1, 5, 1, 39, 0, 5])))
            + tf.reduce_sum(tf.sparse.segment_mean(
                embedded, ids, tf.range(tf.size(ids, tf.int64)), sparse_gradient=True)))
    fed = tf.IndexedSlices(v1.placeholder(tf.float32, [None, 1]),
                           v1.placeholder(tf.int64, [None]), tf.constant([100_000, 1]))
    slices = [*tf.gradients(loss, [gathered, embedded]), fed]
    plans = [sparse_gradients._Plan("gathered", (40, 3), tf.float32, 2, "rows"),
             sparse_gradients._Plan("embedded", (50_000, 4), tf.float32, 2, "auto"),
             sparse_gradients._Plan("fed", (100_000, 1), tf.float32, 2, "auto")]
    plans[0].static = 6
    rng = np.random.default_rng(0)
    feeds = []
    for embedded_ids, fed_rows in _STEPS:
        fed_ids = rng.integers(0, 100_000 if fed_rows > 25_000 else 90, fed_rows)
        feeds.append({ids: rng.integers(0, 60, embedded_ids), fed.indices: fed_ids,
                      fed.values: rng.normal(size=(fed_rows, 1))})
    return [sparse_gradients._Rows(s, p) for s, p in zip(slices, plans)], slices, feeds


@pytest.mark.parametrize("control_flow_v2", [True, False], ids=["cond_v2", "switch_merge"])
def test_tables_cross_in_one_all_gather_while_their_rows_fit_the_guess(monkeypatch,
                                                                      control_flow_v2):
    """Every table's exchanged rows, and a dense gradient riding along, sum to twice the
    local gradient (two replicas sending the same). A step whose rows fit the last
    step's counts plus a quarter takes one all-gather, a step with more two; an
    all-gather key always has one size; the table above its rule crosses dense. Under
    TensorFlow 2 and 1 behaviour's conds."""
    monkeypatch.setattr(control_flow_util, "ENABLE_CONTROL_FLOW_V2", control_flow_v2)
    with tf.Graph().as_default():
        tables, slices, feeds = _tables()
        collectives = _TwinCollectives()
        bias = tf.reshape(tf.cast(tf.range(6), tf.float32), [2, 3])
        exchanged, (bias_sum,) = sparse_gradients._exchanged(tables, [bias], collectives)
        # The rows, the rest of them (in a cond), each table's dense all-reduce (in a cond).
        kinds = [kind for kind, _, _ in collectives.calls]
        assert kinds == ["all_gather", "all_gather", "all_reduce", "all_reduce"]
        sums = [tf.math.unsorted_segment_sum(values, tf.cast(indices, tf.int32), p.shape[0])
                for (indices, values), p in zip(exchanged, [t.plan for t in tables])]
        dense = [2 * tf.convert_to_tensor(s) for s in slices]
        sizes, fed_rows, gathers = {}, [], []
        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.global_variables_initializer(),
                         tf.compat.v1.local_variables_initializer()])
            for feed in feeds:
                before = session.run(collectives.gathers)
                got, want, (key, size), rows, doubled = session.run(
                    (sums, dense, collectives.calls[0][1:], tf.size(exchanged[2][0]),
                     bias_sum), feed)
                gathers.append(session.run(collectives.gathers) - before)
                np.testing.assert_array_equal(doubled, [[0, 2, 4], [6, 8, 10]])
                sizes.setdefault(key, set()).add(size)
                fed_rows.append(rows)
                for table, (g, w) in enumerate(zip(got, want)):
                    np.testing.assert_allclose(g, w, atol=1e-5, err_msg=f"table {table}")
    assert len(sizes) > 1 and all(len(s) == 1 for s in sizes.values()), sizes
    assert gathers == [2, 1, 2, 1, 2]
    assert fed_rows[3] == 100_000 and max(fed_rows[:3] + fed_rows[4:]) <= 2 * 1_000


def test_static_tables_cross_in_one_all_gather_without_counts():
    with tf.Graph().as_default():
        tables, _, _ = _tables()
        collectives = _TwinCollectives()
        sparse_gradients._exchanged(tables[:1], [], collectives)
        assert not tf.compat.v1.local_variables()
    assert [(kind, key) for kind, key, _ in collectives.calls] == [("all_gather", 100)]


def test_guesses_carry_from_step_to_step_inside_a_loop_of_steps():
    """Under ``steps_per_run`` the steps of a run are iterations of one while loop, one
    at a time (``parallel_iterations=1``, as TensorFlow's loop of steps runs them): the
    guess the first step leaves (10 rows plus a quarter) holds the next two (11 and 12
    rows) to one all-gather each."""
    with tf.Graph().as_default():
        table = tf.compat.v1.get_variable("table", [50_000, 4])
        plan = sparse_gradients._Plan("table", (50_000, 4), tf.float32, 2, "auto")
        collectives = _TwinCollectives()

        def step(number, total):
            ids = tf.range(10 + number, dtype=tf.int64)
            loss = tf.reduce_sum(tf.sparse.segment_mean(table, ids, ids, sparse_gradient=True))
            rows = sparse_gradients._Rows(tf.gradients(loss, [table])[0], plan)
            (_, values), = sparse_gradients._exchanged([rows], [], collectives)[0]
            return number + 1, total + tf.reduce_sum(values)

        _, total = tf.while_loop(lambda number, _: number < 3, step, [0, 0.0],
                                 parallel_iterations=1)
        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.global_variables_initializer(),
                         tf.compat.v1.local_variables_initializer()])
            # Each row's gradient is 1 in its 4 columns, twice (two replicas).
            assert session.run(total) == 2 * 4 * (10 + 11 + 12)
            assert session.run(collectives.gathers) == 2 + 1 + 1


def test_steps_run_whole_under_tensorflow_1_control_flow(monkeypatch):
    """With Switch/Merge conds (TensorFlow 1 behaviour), a lone table of width 1, the
    shape of a linear column's FTRL gradient, crosses whole in every step, and an op
    that waits on its rows runs in each, whether or not the step takes the second
    all-gather (Grappler's rewrites inside a cond's branch once left it dead)."""
    monkeypatch.setattr(control_flow_util, "ENABLE_CONTROL_FLOW_V2", False)
    with tf.Graph().as_default():
        v1 = tf.compat.v1
        fed = tf.IndexedSlices(v1.placeholder(tf.float32, [None, 1]),
                               v1.placeholder(tf.int64, [None]), tf.constant([1000, 1]))
        plan = sparse_gradients._Plan("fed", (1000, 1), tf.float32, 2, "rows")
        collectives = _TwinCollectives()
        (indices, values), = sparse_gradients._exchanged(
            [sparse_gradients._Rows(fed, plan)], [], collectives)[0]
        steps = tf.Variable(0)
        with tf.control_dependencies([values]):
            step = steps.assign_add(1)
        total = tf.reduce_sum(values)
        with v1.Session() as session:
            session.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
            for number, rows in enumerate((4, 3, 9)):  # the second fits the first's guess
                feed = {fed.indices: np.arange(rows), fed.values: np.ones([rows, 1])}
                assert session.run([total, step], feed) == [2 * rows, number + 1]
            assert session.run(collectives.gathers) == 2 + 1 + 2


def _cluster(model_dir, model, mode, extra):
    command = [sys.executable, "-m", "tests.programs.sparse_rows_job", model_dir, model,
               mode, str(STEPS), *extra]
    return run_workers([command] * 2, free_ports(2), 240)


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.parametrize("model,behaviour", [
    ("gather", "tf2"), ("gather", "tf1"), ("canned", "tf2"),
    # The legacy program's case also runs on the other TensorFlow end in CI.
    pytest.param("canned", "tf1", marks=pytest.mark.both_ends)])
def test_rows_exchange_trains_as_the_dense_reduction(tmp_path, model, behaviour):
    """Two workers whose steps touch different numbers of rows: the weights and optimizer
    slots (Adagrad, FTRL, Adam; the canned estimator's FTRL and Adam) after the rows
    exchange equal those after the dense all-reduce within 1e-6."""
    extra = ["tf1"] if behaviour == "tf1" else []
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = {mode: pool.submit(_cluster, str(tmp_path / mode), model, mode, extra)
                for mode in ("rows", "dense")}
        results = {mode: run.result() for mode, run in runs.items()}
    for workers in results.values():
        for stdout, stderr, code in workers:
            assert code == 0 and "FINISHED" in stdout, stderr[-3000:]
    chief_stderr = {mode: workers[0][1] for mode, workers in results.items()}
    reports = [line for line in chief_stderr["rows"].splitlines()
               if line.startswith("sparse_gradients: 2 replicas")]
    assert len(reports) == 1 and reports[0].count("as rows (asked") >= 2, reports
    assert "dense (" in chief_stderr["dense"] and "as rows" not in chief_stderr["dense"]
    rows = tf.train.load_checkpoint(str(tmp_path / "rows"))
    dense = tf.train.load_checkpoint(str(tmp_path / "dense"))
    assert rows.get_tensor("global_step") == dense.get_tensor("global_step") == STEPS
    names = [n for n, dtype in rows.get_variable_to_dtype_map().items() if dtype.is_floating]
    assert any("Ftrl" in n for n in names) and any("Adam" in n for n in names)
    differences = {n: float(np.max(np.abs(rows.get_tensor(n) - dense.get_tensor(n)), initial=0))
                   for n in names}
    assert max(differences.values()) <= 1e-6, differences
