"""The collective rounds of a census-style wide-and-deep step on two workers (mend
``sparse_gradients``): each optimizer's gradients cross in one collective.

One module fixture runs two two-worker clusters of ``tests/programs/census_rounds_job.py``
side by side: TensorFlow's default packing (every dense gradient of a reduction in one
all-reduce) and one all-reduce per gradient (``all_reduce_bytes_per_pack=1``), which is
how the DNN optimizer's gradients crossed while the densified embedding gradients' device
strings differed from their variables'. Each worker counts the collectives that ran in a
traced step (a full trace of ``Session.run``: deterministic, whatever the machine's load).
"""
import concurrent.futures
import json
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from estimator_dist.supervisor.tasks import free_ports
from tests.estimator_dist.hooks.test_exchange_advice import ADVICE
from tests.support import run_workers

pytestmark = [pytest.mark.both_ends, pytest.mark.xdist_group("sparse_gradients_rounds")]

STEPS = 24
# The step's collectives outside the optimizers: the finite input's flags (mend
# input_end) and Estimator's all-reduce of the loss it reports.
OUTSIDE = 2


def _cluster(model_dir, bytes_per_pack):
    command = [sys.executable, "-m", "tests.programs.census_rounds_job", model_dir,
               str(STEPS), str(bytes_per_pack)]
    return run_workers([command] * 2, free_ports(2), 400)


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    """{bytes_per_pack: (model_dir, [each worker's printed collectives], [each worker's
    stderr])}."""
    base = tmp_path_factory.mktemp("census")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = {pack: pool.submit(_cluster, str(base / f"pack{pack}"), pack) for pack in (0, 1)}
        results = {pack: run.result() for pack, run in runs.items()}
    counted = {}
    for pack, workers in results.items():
        censuses = []
        for stdout, stderr, code in workers:
            assert code == 0 and "FINISHED" in stdout, stderr[-3000:]
            line = next(line for line in stdout.splitlines() if line.startswith("COLLECTIVES "))
            censuses.append(json.loads(line.split(" ", 1)[1]))
        counted[pack] = (str(base / f"pack{pack}"), censuses, [w[1] for w in workers])
    return counted


def _steps(census, pack):
    return [step for worker in census[pack][1] for step in worker["steps"]]


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(600)
def test_each_optimizer_crosses_in_one_collective_a_step(census):
    """Adagrad's twelve dense gradients (five kernels, five biases, two small embeddings
    densified) in one all-reduce; FTRL's crossed columns' rows, small tables and bias in
    one all-gather; the same in every traced step on both workers."""
    steps = _steps(census, 0)
    assert len(steps) == 6, steps  # Three traced steps a worker.
    for step in steps:
        assert step["scopes"] == {"training/Adagrad": 1, "training/Ftrl": 1, "": OUTSIDE}, step
        assert step["types"] == {"CollectiveReduceV2": 1 + OUTSIDE, "CollectiveGatherV2": 1}
    for worker in census[0][1]:
        assert worker["graph"] == {"CollectiveReduceV2": 1 + OUTSIDE, "CollectiveGatherV2": 1}


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(600)
def test_one_all_reduce_trains_as_one_per_gradient(census):
    """One all-reduce per gradient (twelve a step, as before the densified gradients were
    placed on their variables' device) ends at the same weights and slots within 1e-6."""
    assert all(step["scopes"]["training/Adagrad"] == 12 for step in _steps(census, 1))
    packed = tf.train.load_checkpoint(census[0][0])
    apart = tf.train.load_checkpoint(census[1][0])
    assert packed.get_tensor("global_step") == apart.get_tensor("global_step") == STEPS
    names = [n for n, dtype in packed.get_variable_to_dtype_map().items() if dtype.is_floating]
    assert any("Adagrad" in n for n in names) and any("Ftrl" in n for n in names)
    differences = {n: float(np.max(np.abs(packed.get_tensor(n) - apart.get_tensor(n)),
                                   initial=0)) for n in names}
    assert max(differences.values()) <= 1e-6, differences


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(600)
def test_the_chief_says_once_that_one_process_would_be_faster(census):
    """At batch 40 the step's collectives cost more than the second worker's compute
    saves: the chief prints the exchange advice (``hooks.exchange_advice``) once, with
    numbers that say so; the other worker prints nothing."""
    chief, worker = census[0][2]
    lines = ADVICE.findall(chief)
    assert len(lines) == 1, chief[-3000:]
    exchange, compute = (float(x) for x in re.search(
        r"spent ([\d.]+) ms exchanging gradients .* and ([\d.]+) ms computing", lines[0]).groups())
    assert exchange > compute > 0, lines[0]
    assert not ADVICE.search(worker), worker[-3000:]
