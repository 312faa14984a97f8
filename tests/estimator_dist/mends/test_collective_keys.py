"""Each multi-worker strategy of a process collects under keys of its own
(``collective_keys``)."""
import sys

import pytest

from estimator_dist.mends import collective_keys
from tests.support import run_pythons


def test_each_build_starts_past_the_keys_of_the_builds_before():
    class Strategy:
        _collective_key_base = 0

    collective_keys.apply(Strategy)
    first = Strategy._collective_key_base
    collective_keys.apply(Strategy)
    assert Strategy._collective_key_base == first + collective_keys.KEYS_PER_STRATEGY


_PROGRAMS = ("iris_custom_estimator", "iris_premade_estimator")


def _two_programs_on_two_workers(model_dir):
    """Two legacy programs, each building its own config, one after the other in each
    process of a two-worker cluster, under TF1 behaviour (graph mode)."""
    return ["-m", "estimator_dist.launch", "--workers", "2", "--timeout", "300", "--",
            sys.executable, "-m", "tests.end_to_end.legacy.runner", *_PROGRAMS,
            "--behaviour", "tf1", "--strategy", "multi_worker", "--model-dir", model_dir]


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(400)
def test_second_config_in_a_process_fails_without_the_mend(tmp_path):
    """The mend off, the second program's first step fails in a collective whose keys the
    first program's strategy used; with it, both train. ``collective_instances`` is off
    too: its instance keys, which go on from one graph to the next in a group, would
    keep the second strategy's collectives apart from the first's in the shared group."""
    mended, plain = (run_pythons([_two_programs_on_two_workers(str(tmp_path / "mended"))],
                                 timeout=360, env=env)[0]
                     for env in ({}, {"ESTIMATOR_DIST_MENDS_OFF":
                                      "collective_keys,collective_instances"}))
    log = mended.stdout[-3000:] + mended.stderr[-3000:]
    assert mended.returncode == 0, log
    for worker in ("worker 0", "worker 1"):
        for program in _PROGRAMS:
            assert f"[{worker}] RESULT {program} " in mended.stdout, log
    log = plain.stdout[-3000:] + plain.stderr[-3000:]
    assert f"RESULT {_PROGRAMS[0]} " in plain.stdout, log
    assert f"ERROR {_PROGRAMS[1]} " in plain.stdout, log
    assert "Collective instance" in plain.stdout + plain.stderr, log
