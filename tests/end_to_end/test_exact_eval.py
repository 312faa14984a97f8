"""Evaluation counts every example exactly once, under mirrored and multi_worker.

Each case evaluates 150 examples at a global batch of 128 (a short last batch) in its
own process, under TF2 behaviour and under ``disable_v2_behavior()``, with an input_fn
that ignores ``input_context`` and one that uses it.
"""
import sys

import pytest

from estimator_dist.job import events
from tests.support import SHARED_RUNS, run_together, selected_values
from tests.programs.exact_eval_job import CLUSTER_STEPS, NUM_EXAMPLES

pytestmark = [pytest.mark.slow, pytest.mark.multi_process]

_EVALUATIONS = 20
_BEHAVIOURS = ["tf2", "tf1"]


def _counts(request, tmp_path_factory, behaviour, input_kind, wiring):
    """The counts of the run of ``behaviour``; the other behaviour's, when this session
    runs its test too, runs at the same time (two independent single processes)."""
    args = {("exact_eval", b, input_kind, wiring): [
                "-m", "tests.programs.exact_eval_job",
                str(tmp_path_factory.mktemp(f"exact_eval_{b}_{input_kind}") / "model"), b,
                input_kind, wiring, str(_EVALUATIONS)]
            for b in selected_values(request, "behaviour")}
    result = run_together(args, ("exact_eval", behaviour, input_kind, wiring), timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    line = [line for line in result.stdout.splitlines() if line.startswith("COUNTS ")][-1]
    return [int(n) for n in line.split()[1:]]


@SHARED_RUNS
@pytest.mark.parametrize("input_kind", ["legacy", "context"])
@pytest.mark.parametrize("behaviour", _BEHAVIOURS)
def test_mirrored_evaluate_counts_every_example_each_time(request, tmp_path_factory,
                                                          behaviour, input_kind):
    counts = _counts(request, tmp_path_factory, behaviour, input_kind, "package")
    assert counts == [NUM_EXAMPLES] * _EVALUATIONS


@pytest.mark.parametrize("behaviour", _BEHAVIOURS)
def test_multi_worker_evaluator_counts_every_example_each_time(python_run, model_dir,
                                                               behaviour):
    result = python_run(["-m", "estimator_dist.launch", "--workers", "2", "--evaluator",
                         "--timeout", "240", "--", sys.executable, "-m",
                         "tests.programs.exact_eval_job", model_dir, behaviour, "legacy",
                         "cluster", "0"], timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    counts = events.scalars(f"{model_dir}/eval")["examples"]
    assert counts[-1][0] == CLUSTER_STEPS, counts  # The evaluator reached the last checkpoint
    assert {count for _, count in counts} == {NUM_EXAMPLES}, counts  # and counted exactly.
