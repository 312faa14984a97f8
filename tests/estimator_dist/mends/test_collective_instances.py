"""Each training graph of a multi-worker strategy collects under instance keys of its own
(``collective_instances``)."""
import copy
import sys

import pytest
from tensorflow.python.distribute import cross_device_utils

from estimator_dist.mends import collective_instances
from tests.support import run_pythons

_DEVICE = "/job:worker/replica:0/task:0/device:CPU:0"


class _Extended:
    """What the mend changes of a strategy's ``extended``: TensorFlow's configuring of a
    copy makes it a new ``CollectiveKeys``."""

    def __init__(self, group_key_start):
        self._group_key_start = group_key_start
        self._initialize_multi_worker(None)

    def _initialize_multi_worker(self, cluster_resolver):
        del cluster_resolver
        self._collective_keys = cross_device_utils.CollectiveKeys(self._group_key_start)


class _Strategy:
    def __init__(self, group_key_start):
        self.extended = _Extended(group_key_start)


def _keys(extended, count):
    keys = extended._collective_keys
    group = keys.get_group_key([_DEVICE])
    return [keys.get_instance_key(group, _DEVICE) for _ in range(count)]


def test_each_configured_copy_goes_on_past_the_keys_taken_before():
    strategy = _Strategy(group_key_start=900_001)  # A group no other test takes keys in.
    collective_instances.apply(strategy)
    first = _keys(strategy.extended, 3)
    assert first == [100, 101, 102]  # TensorFlow's own keys for the first graph.
    configured = copy.deepcopy(strategy)
    configured.extended._initialize_multi_worker(None)  # As the coordinator configures it.
    assert _keys(configured.extended, 2) == [103, 104]
    other = _Strategy(group_key_start=900_002)
    collective_instances.apply(other)
    assert _keys(other.extended, 1) == [100]  # Counted per group.


def _two_train_calls(model_dir):
    return ["-m", "estimator_dist.launch", "--workers", "2", "--timeout", "300", "--",
            sys.executable, "-m", "tests.programs.other_graph_job", model_dir]


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(400)
def test_second_train_of_another_graph_fails_without_the_mend(tmp_path):
    """The mend off, a second ``train`` call whose graph has one collective more than the
    first's stops at its first collective (a key the server remembers for another op);
    with it, both calls train."""
    mended, plain = (run_pythons([_two_train_calls(str(tmp_path / name))], timeout=360,
                                 env=env)[0]
                     for name, env in (("mended", {}), ("plain", {
                         "ESTIMATOR_DIST_MENDS_OFF": "collective_instances"})))
    log = mended.stdout[-3000:] + mended.stderr[-3000:]
    assert mended.returncode == 0, log
    assert '[worker 0] RESULT {"global_step": 10}' in mended.stdout, log
    assert "[worker 1] RESULT " in mended.stdout, log
    log = plain.stdout[-3000:] + plain.stderr[-3000:]
    assert plain.returncode != 0, log
    assert "ERROR InvalidArgumentError" in plain.stdout, log
    assert "in the collective instance" in plain.stdout + plain.stderr, log
