"""The finite-input program on two workers, again and again: every run ends on both
workers at the same step, exit 0, no hang and no crash (uneven shards: 12 and 8 steps an
epoch; train/evaluate by epochs, then train_and_evaluate).

CI runs ``RUNS`` (3); set ``ESTIMATOR_DIST_FINITE_INPUT_RUNS=20`` for the full check.
Runs alternate TF2 and TF1 behaviour.
"""
import json
import os
import re
import sys

import pytest

from tests.support import run_pythons
from tests.end_to_end.legacy import corpus

RUNS = int(os.environ.get("ESTIMATOR_DIST_FINITE_INPUT_RUNS", "3"))
_PROGRAM = "finite_input_epochs"
_RUN_SECONDS = 240

pytestmark = [pytest.mark.slow, pytest.mark.multi_process,
              pytest.mark.timeout(RUNS * (_RUN_SECONDS + 60))]


def _args(model_dir, behaviour):
    return ["-m", "estimator_dist.launch", "--workers", "2", "--timeout", str(_RUN_SECONDS),
            "--", sys.executable, "-m", "tests.end_to_end.legacy.runner", _PROGRAM,
            "--behaviour", behaviour,
            "--strategy", "multi_worker", "--model-dir", model_dir]


def test_finite_input_two_workers_end_together_every_run(tmp_path):
    """Runs go two at a time (one per behaviour): each is its own cluster, in its own
    network namespace, with the default collective and rendezvous timeouts (300 s)."""
    failures = []
    for first in range(0, RUNS, 2):
        runs = list(range(first, min(first + 2, RUNS)))
        results = run_pythons([_args(str(tmp_path / f"run{run}"), corpus.BEHAVIOURS[run % 2])
                               for run in runs], timeout=_RUN_SECONDS + 30)
        for run, result in zip(runs, results):
            behaviour = corpus.BEHAVIOURS[run % 2]
            steps = re.findall(rf"^\[worker \d\] RESULT {_PROGRAM} (.*)$", result.stdout, re.M)
            final = [json.loads(s)["final_step"] for s in steps]
            if result.returncode or len(final) != 2 or corpus.final_step(
                    _PROGRAM, "multi_worker") not in final:
                failures.append(f"run {run} ({behaviour}): exit {result.returncode}, final "
                                f"steps {final}\n{result.stdout[-1500:]}{result.stderr[-1500:]}")
    assert not failures, f"{len(failures)} of {RUNS} runs failed:\n" + "\n".join(failures)
