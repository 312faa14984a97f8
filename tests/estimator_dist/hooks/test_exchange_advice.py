"""The exchange advice: a multi-worker run whose collectives cost more than its extra
workers' compute saves says so once, with the numbers and what would be faster; a run
whose workers win says nothing. (Its census-style trainer, where it speaks, is in
``tests/estimator_dist/mends/test_sparse_gradients_rounds.py``.)"""
import re
import sys

import pytest
import tensorflow as tf

from estimator_dist.hooks import exchange_advice
from estimator_dist.supervisor.tasks import free_ports
from tests.support import run_workers

ADVICE = re.compile(r"^estimator_dist: multi_worker: a step takes .*$", re.MULTILINE)


@pytest.mark.parametrize("intervals,length", [
    ([], 0), ([(0, 5)], 5), ([(0, 5), (3, 8)], 8), ([(4, 6), (0, 5)], 6),
    ([(0, 2), (5, 7)], 4), ([(0, 10), (2, 3)], 10)])
def test_intervals_length_is_that_of_their_union(intervals, length):
    assert exchange_advice.intervals_length(intervals) == length


def test_step_split_counts_compute_only_outside_the_collectives():
    """An op that runs beside a collective is exchange time; gaps are neither."""
    metadata = tf.compat.v1.RunMetadata()
    device = metadata.step_stats.dev_stats.add()
    for name, start, length in (("matmul", 0, 2000), ("all_reduce", 1000, 4000),
                                ("apply", 3000, 1000), ("loss", 8000, 1000)):
        device.node_stats.add(node_name=name, all_start_micros=start,
                              all_end_rel_micros=length)
    assert exchange_advice.step_split(metadata.step_stats, {"all_reduce"}) == (4.0, 2.0)


@pytest.mark.parametrize("workers,exchange,compute,said", [
    (2, 5.0, 2.0, True), (2, 2.0, 5.0, False), (2, 3.0, 3.0, False),
    (3, 5.0, 2.0, True), (3, 3.0, 2.0, False), (2, 1.0, 0.0, True)])
def test_advice_line_only_when_the_exchange_outweighs_the_saved_compute(
        workers, exchange, compute, said):
    line = exchange_advice.advice_line(workers, 9.5, exchange, compute)
    assert (line is not None) == said
    if said:
        assert ADVICE.fullmatch(line), line
        assert f"{exchange:.1f} ms exchanging gradients" in line
        assert f"{compute:.1f} ms computing" in line
        assert f"the {(workers - 1) * compute:.1f} ms a step that {workers} workers" in line
        assert "a larger per-worker batch" in line
        assert "parameter_server" in line and "one process" in line


# Alone: the advice weighs measured times, and on a loaded machine the workers wait for
# each other in the exchange (a CI run beside other cluster tests: 39 ms exchanging
# against 15 ms computing, where alone it computes longer than it exchanges).
@pytest.mark.alone
@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(400)
def test_a_compute_bound_model_on_two_workers_gets_no_advice(tmp_path):
    command = [sys.executable, "-m", "tests.programs.compute_bound_job", str(tmp_path), "30"]
    workers = run_workers([command] * 2, free_ports(2), 300)
    for index, (stdout, stderr, code) in enumerate(workers):
        assert code == 0 and "FINISHED" in stdout, f"worker {index}: {stderr[-3000:]}"
        assert not ADVICE.search(stderr), f"worker {index}: {ADVICE.search(stderr)[0]}"
