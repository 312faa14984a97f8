"""A seeded Estimator's tf.compat.v1.layers start from the same weights in every process.

Two processes of ``tests/programs/seed_probe.py`` per behaviour: the plain RunConfig's
kernels (no process-wide mend) and ``make_run_config``'s (mend ``keras_2_seeds``).
"""
import json

import pytest

from tests.support import run_pythons

pytestmark = [pytest.mark.slow, pytest.mark.both_ends, pytest.mark.timeout(300),
              pytest.mark.xdist_group("keras_2_seeds")]

_RUNS = {}


def _kernels(tmp_path_factory, behaviour):
    """The probe's JSON of two processes under ``behaviour`` (all four run at once)."""
    if not _RUNS:
        root = tmp_path_factory.mktemp("seeds")
        cases = [(b, i) for b in ("tf2", "tf1") for i in range(2)]
        args = [["-m", "tests.programs.seed_probe", str(root / f"{b}{i}"),
                 *(["tf1"] if b == "tf1" else [])] for b, i in cases]
        for case, result in zip(cases, run_pythons(args, timeout=240)):
            assert result.returncode == 0, result.stderr[-3000:]
            _RUNS[case] = json.loads(result.stdout.strip().splitlines()[-1])
    return [_RUNS[behaviour, i] for i in range(2)]


def test_tf_layers_ignore_tf_random_seed_under_tf2_behaviour(tmp_path_factory):
    """Plain TF, TF2 behaviour: the same tf_random_seed, other weights in each process."""
    first, second = _kernels(tmp_path_factory, "tf2")
    assert first["plain"] != second["plain"]


def test_tf_layers_take_the_graph_seed_under_tf1_behaviour(tmp_path_factory):
    first, second = _kernels(tmp_path_factory, "tf1")
    assert first["plain"] == second["plain"]


@pytest.mark.parametrize("behaviour", ["tf2", "tf1"])
def test_mended_layers_start_alike_in_every_process(tmp_path_factory, behaviour):
    """Under make_run_config both processes start from the same weights; Python's random
    state and Keras 2's seed generator are as they were."""
    first, second = _kernels(tmp_path_factory, behaviour)
    assert first["mended"] == second["mended"]
    for run in (first, second):
        assert run["random_kept"] and run["keras_kept"]
