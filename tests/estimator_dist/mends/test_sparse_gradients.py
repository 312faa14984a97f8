"""Sparse gradients under "multi_worker": exchanged as rows, trained as the dense
reduction trains (mend ``sparse_gradients``)."""
import concurrent.futures
import sys

import numpy as np
import pytest
import tensorflow as tf

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


def _cluster(model_dir, model, mode, extra):
    command = [sys.executable, "-m", "tests.estimator_dist.sparse_rows_job", model_dir, model,
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
