"""The reads of other threads' frames (``internals.estimator_training``), which the ps
watch and the stall watchdog make from their threads all through a training."""
import gc
import subprocess

import pytest

from estimator_dist.mends import internals
from tests.support import run_python

# A collection runs at nearly every allocation, with a tf.Graph in a reference cycle to
# free each time: on Python 3.11 and older, reading the threads' frames while a collection
# can start inside the read hung the process for good on the first round.
_GRAPHS_COLLECTED_DURING_READS = """
import gc
import tensorflow as tf
from estimator_dist.mends import internals
for _ in range(20):
    graph = tf.Graph()
    graph.cycle = graph
    del graph
    gc.set_threshold(1)
    internals.estimator_training()
    internals.training_model_dir(0)
    gc.set_threshold(700)
print("read 40 times")
"""


@pytest.mark.slow
def test_reading_threads_frames_survives_a_collection_that_frees_a_graph():
    try:
        result = run_python(["-c", _GRAPHS_COLLECTED_DURING_READS], timeout=120,
                            env={"ESTIMATOR_DIST_STARTUP_HOOK": "0"})
    except subprocess.TimeoutExpired:
        pytest.fail("the process hung reading the threads' frames while a collection ran")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "read 40 times"


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_threads_frames_leaves_the_collector_as_it_was(enabled):
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        assert internals.estimator_training() is None
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
