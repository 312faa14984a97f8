"""Training stops with one line when replicas or workers stop holding the same weights.

Each case trains ``divergence_job``'s model_fn in its own process under a time limit:
mirrored-2 in TF2 and TF1 behaviour, and two local workers.
"""
import sys

import pytest

from estimator_dist.supervisor.tasks import free_ports
from estimator_dist.hooks import divergence
from tests.support import SHARED_RUNS, run_together, run_workers, selected_values

pytestmark = [pytest.mark.slow, pytest.mark.multi_process]

_ERROR = ("estimator_dist.hooks.divergence.ReplicaDivergenceError: variable {name!r} must hold the "
          "same value on every one of the {place}, but its copies differ by ")


def _mirrored_args(model_dir, behaviour, update):
    return ["-m", "tests.programs.divergence_job", model_dir, behaviour, "mirrored",
            update, "120"]


def _mirrored(python_run, model_dir, behaviour, update):
    return python_run(_mirrored_args(model_dir, behaviour, update), timeout=180)


def _mirrored_both_behaviours(request, tmp_path_factory, behaviour, update):
    """The run of ``behaviour``; the other behaviour's, when this session runs its test
    too, runs at the same time (two independent single processes)."""
    args = {("divergence", b, update): _mirrored_args(
                str(tmp_path_factory.mktemp(f"divergence_{b}_{update}") / "model"), b, update)
            for b in selected_values(request, "behaviour")}
    return run_together(args, ("divergence", behaviour, update), timeout=180)


@SHARED_RUNS
@pytest.mark.parametrize("behaviour", ["tf2", "tf1"])
def test_mirrored_per_replica_assigning_optimizer_stops_with_one_line(request,
                                                                      tmp_path_factory,
                                                                      behaviour):
    result = _mirrored_both_behaviours(request, tmp_path_factory, behaviour, "assigning")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(_ERROR.format(name="kernel", place="replicas")), last
    assert "at step 1: something updates each copy on its own" in last
    assert "FINISHED" not in result.stdout


def test_unmended_mirrored_per_replica_assigning_optimizer_trains_on_silently(python_run,
                                                                           model_dir):
    """TensorFlow's own behaviour (mend ``divergence_check`` turned off): the copies drift
    apart and training ends without a word."""
    result = python_run(["-m", "tests.programs.divergence_job", model_dir, "tf2",
                         "mirrored", "assigning", "20"], timeout=180,
                        env={"ESTIMATOR_DIST_MENDS_OFF": "divergence_check"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "FINISHED" in result.stdout


def test_mirrored_assign_in_model_fn_names_the_variable(python_run, model_dir):
    result = _mirrored(python_run, model_dir, "tf2", "model_fn_assign")
    assert result.returncode != 0
    assert _ERROR.format(name="last_batch_mean", place="replicas") in result.stderr


@SHARED_RUNS
@pytest.mark.parametrize("update", ["standard", "aggregated"])
@pytest.mark.parametrize("behaviour", ["tf2", "tf1"])
def test_mirrored_aggregated_updates_not_flagged(request, tmp_path_factory, behaviour, update):
    """A v1 optimizer's minimize, and the documented fix of the assigning optimizer."""
    result = _mirrored_both_behaviours(request, tmp_path_factory, behaviour, update)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "FINISHED" in result.stdout
    assert "ReplicaDivergenceError" not in result.stderr


def _two_workers(model_dir, update):
    """(stdout, stderr, exit code) of each worker, each run to its own end (a launcher
    would stop the second worker as soon as the first failed)."""
    command = [sys.executable, "-m", "tests.programs.divergence_job", model_dir, "tf2",
               "multi_worker", update, "120"]
    return run_workers([command] * 2, free_ports(2), 200)


def test_multi_worker_per_replica_assigning_optimizer_stops_every_worker(model_dir):
    for stdout, stderr, code in _two_workers(model_dir, "assigning"):
        assert code != 0
        assert _ERROR.format(name="kernel", place="workers") in stderr, stderr[-3000:]
        assert "FINISHED" not in stdout


def test_multi_worker_standard_optimizer_not_flagged(model_dir):
    for stdout, stderr, code in _two_workers(model_dir, "standard"):
        assert code == 0, stderr[-3000:]
        assert "FINISHED" in stdout
        assert "ReplicaDivergenceError" not in stderr


def _hook_across_workers(checks):
    hook = divergence.DivergenceHook(strategy=None)
    hook._check = (["dense/kernel"], None, None, "workers")
    hook._run_check = checks.append
    return hook


def test_end_after_step_that_never_returned_runs_no_worker_check():
    """The session ended by the end of input (the last step raised OutOfRangeError): a
    collective now would fail, so the end check does not run."""
    checks = []
    hook = _hook_across_workers(checks)
    hook.before_run(None)
    hook.end("session")
    assert checks == []


def test_end_after_completed_steps_runs_worker_check():
    checks = []
    hook = _hook_across_workers(checks)
    hook.before_run(None)
    hook._in_step, hook._steps = False, 7  # after_run of step 7, without its check.
    hook.end("session")
    assert checks == ["session"]


_LARGE_AND_SMALL_PROBE = """
import numpy as np
import tensorflow as tf
import estimator_dist
from estimator_dist.hooks import divergence
config = estimator_dist.make_run_config("mirrored", num_replicas=2)
strategy = config.train_distribute
with tf.Graph().as_default():
    with strategy.scope():
        small = tf.compat.v1.get_variable("small", [3], initializer=tf.zeros_initializer())
        large = tf.compat.v1.get_variable(
            "large", [divergence._FLAT_MAX_ELEMENTS + 5], initializer=tf.zeros_initializer())
        names, spreads, scales, place = divergence._check_tensors(strategy)
    copies = {v: strategy.experimental_local_results(v) for v in (small, large)}
    drift = [copies[small][1].assign([0.0, 0.5, 0.0]),
             copies[large][1].assign(tf.one_hot(7, divergence._FLAT_MAX_ELEMENTS + 5, 2.0))]
    session = tf.compat.v1.Session(config=config.session_config)
    session.run(tf.compat.v1.global_variables_initializer())
    before = session.run(spreads)
    session.run(drift)
    after = session.run(spreads)
    print("SPREADS", dict(zip(names, before.tolist())), dict(zip(names, after.tolist())))
"""


def test_check_compares_large_variables_one_by_one_in_variable_order(python_run):
    """A variable above ``_FLAT_MAX_ELEMENTS`` is checked outside the one flat vector; the
    spreads still line up with the variable names."""
    result = python_run(["-c", _LARGE_AND_SMALL_PROBE], timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    line = result.stdout.split("SPREADS ")[1]
    assert line.strip() == "{'small': 0.0, 'large': 0.0} {'small': 0.5, 'large': 2.0}", line


_CHECKSUMS_PROBE = """
import tensorflow as tf
import estimator_dist
from estimator_dist.hooks import divergence
strategy = estimator_dist.make_run_config("mirrored", num_replicas=2).train_distribute
size = divergence._FLAT_MAX_ELEMENTS + 5
with tf.Graph().as_default() as graph:
    with strategy.scope():
        large = tf.compat.v1.get_variable("large", [size], initializer=tf.ones_initializer())
        small = tf.compat.v1.get_variable("small", [3], initializer=tf.constant_initializer(
            [1.0, 2.0, 3.0]))
    before = len(graph.get_operations())
    checksums = divergence._checksums(strategy, [large, small])
    per_element = [op.name for op in graph.get_operations()[before:]
                   if any(t.shape.num_elements() and t.shape.num_elements() >= size
                          and t.dtype.is_integer for t in op.outputs)]
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        print("CHECKSUMS", session.run(checksums).tolist(), per_element)
"""


def test_worker_checksums_of_large_variables_make_no_per_element_ids(python_run):
    """The checksums the workers compare: a variable above ``_FLAT_MAX_ELEMENTS`` gets its
    own sums, with no int32 id per element (a constant the graph optimizer folds and
    copies: ~1.1 GiB a worker for a 1e6-bucket wide-and-deep model); in variable order."""
    result = python_run(["-c", _CHECKSUMS_PROBE], timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    size = divergence._FLAT_MAX_ELEMENTS + 5
    line = result.stdout.split("CHECKSUMS ")[1].strip()
    assert line == f"[[{size}.0, {size}.0], [6.0, 14.0]] []", line
