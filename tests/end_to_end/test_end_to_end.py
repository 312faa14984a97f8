"""Every strategy path end to end, each in its own process under a time limit."""
import os
import re
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from estimator_dist import checkpoint_step
from estimator_dist.supervisor.tasks import free_ports
from tests.support import HANG_MARGIN_SECONDS, WatchedPython, run_workers, worker_env

pytestmark = [pytest.mark.slow, pytest.mark.multi_process, pytest.mark.both_ends]

_TRAIN = ["-m", "estimator_dist.train"]


def _assert_trained(result, model_dir, steps):
    assert result.returncode == 0, result.stderr[-3000:]
    assert "accuracy" in result.stdout
    assert os.path.exists(os.path.join(model_dir, f"model.ckpt-{steps}.index"))
    exports = os.listdir(os.path.join(model_dir, "export"))
    assert len(exports) == 1


@pytest.mark.parametrize("strategy_args", [
    ["--strategy", "default"],
    ["--strategy", "mirrored", "--num-replicas", "2"],
    ["--strategy", "mirrored", "--num-replicas", "4"],
    ["--strategy", "tpu", "--tpu-validate"],
], ids=["default", "mirrored-2", "mirrored-4", "tpu-validate"])
def test_strategy_trains_evaluates_exports(python_run, model_dir, strategy_args):
    result = python_run(_TRAIN + strategy_args + ["--max-steps", "60", "--model-dir", model_dir],
                        timeout=240)
    _assert_trained(result, model_dir, 60)


def test_mirrored_lstm_trains_on_four_replicas(python_run, model_dir):
    result = python_run(_TRAIN + ["--model", "lstm", "--strategy", "mirrored", "--num-replicas",
                                  "4", "--max-steps", "20", "--model-dir", model_dir], timeout=240)
    _assert_trained(result, model_dir, 20)


def test_multi_worker_two_workers_and_evaluator(python_run, model_dir):
    result = python_run(["-m", "estimator_dist.launch", "--workers", "2", "--evaluator",
                         "--timeout", "300", "--", sys.executable] + _TRAIN +
                        ["--strategy", "multi_worker", "--max-steps", "60",
                         "--model-dir", model_dir, "--collective-timeout", "60"], timeout=360)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert os.path.exists(os.path.join(model_dir, "model.ckpt-60.index"))
    assert os.listdir(os.path.join(model_dir, "eval")), "the evaluator wrote no eval events"
    assert len(os.listdir(os.path.join(model_dir, "export"))) == 1  # Only the chief exports.


def test_multi_worker_batch_norm_checkpoints_moving_statistics(python_run, model_dir):
    """Batch norm's moving statistics are per-replica (ON_READ, MEAN) variables in
    TensorFlow; saved by the chief alone they would wait on a collective the other worker
    never joins. Under "multi_worker" they are mirrored, so the checkpoint is written."""
    result = python_run(["-m", "estimator_dist.launch", "--workers", "2", "--timeout", "300",
                         "--", sys.executable] + _TRAIN +
                        ["--strategy", "multi_worker", "--param", "batch_norm=true",
                         "--max-steps", "40", "--no-export", "--model-dir", model_dir,
                         "--collective-timeout", "30"], timeout=360)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    checkpoint = tf.train.latest_checkpoint(model_dir)
    assert checkpoint.endswith("-40")
    moving_mean = tf.train.load_variable(checkpoint, "batch_norm_0/moving_mean")
    assert abs(moving_mean).sum() > 0


def test_plain_multi_worker_strategy_fails_on_sparse_gradients(python_run, model_dir):
    """The fact behind the dense reduction of sparse gradients under "multi_worker" (the
    legacy program ``linear_sparse_columns`` trains with ``make_run_config``)."""
    result = python_run(["-m", "estimator_dist.launch", "--workers", "2", "--timeout", "240",
                         "--", sys.executable, "-m", "tests.programs.sparse_gradients_job",
                         model_dir], timeout=300)
    assert "ERROR InvalidArgumentError" in result.stdout, result.stdout[-3000:]
    assert "Shape mismatch in the collective instance" in result.stdout + result.stderr
    assert "FINISHED" not in result.stdout


def test_parameter_server_chief_worker_ps_and_evaluator(python_run, model_dir):
    result = python_run(["-m", "estimator_dist.launch", "--workers", "2", "--ps", "1",
                         "--evaluator", "--timeout", "300", "--", sys.executable] + _TRAIN +
                        ["--strategy", "parameter_server", "--max-steps", "100",
                         "--model-dir", model_dir], timeout=360)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    # Asynchronous workers may each take a step past max_steps before they see it, and
    # past the step a checkpoint is named after while it is written: the evaluator
    # reports the global_step stored in the checkpoint.
    final_step = tf.train.load_variable(tf.train.latest_checkpoint(model_dir), "global_step")
    assert 100 <= final_step <= 102
    evaluator = [line for line in result.stdout.splitlines()
                 if line.startswith("[evaluator 0] metrics")]
    assert evaluator and "accuracy" in evaluator[-1], result.stdout[-3000:]
    # As in TensorFlow's evaluator loop, it ends after the first checkpoint at or past
    # max_steps; an asynchronous worker's step may still follow it into a last one.
    assert 100 <= int(re.search(r"\(step (\d+)\)", evaluator[-1]).group(1)) <= final_step
    assert "batch 128 per worker step, asynchronous (strategy parameter_server)" in result.stdout
    assert len(os.listdir(os.path.join(model_dir, "export"))) == 1  # Only the chief exports.


def test_runtime_started_with_fewer_devices_error_says_what_to_do(python_run):
    code = ("import tensorflow as tf; tf.constant(1.0) + 1.0\n"
            "import estimator_dist\n"
            "try:\n"
            "    estimator_dist.make_run_config('mirrored', num_replicas=2)\n"
            "except RuntimeError as error:\n"
            "    print('ERROR', error)\n")
    result = python_run(["-c", code], timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert ("ERROR mirrored needs 2 logical CPU devices, but the TensorFlow runtime already "
            "started with 1") in result.stdout
    assert "before any TensorFlow op runs" in result.stdout


def _job(model_dir, max_steps, how, *extra):
    return [sys.executable, "-m", "tests.programs.multi_worker_job", model_dir,
            str(max_steps), how, *extra]


@pytest.mark.alone
def test_multi_worker_train_and_evaluate_two_workers(model_dir):
    results = run_workers([_job(model_dir, 100, "train_and_evaluate")] * 2, free_ports(2), 240)
    for stdout, stderr, code in results:
        assert code == 0, stderr[-2000:]
        assert "RESULT None" in stdout  # train_and_evaluate returns nothing on workers.
    assert os.path.exists(os.path.join(model_dir, "model.ckpt-100.index"))


@pytest.mark.alone
def test_multi_worker_all_reduce_in_bfloat16_packs_trains_like_float32(tmp_path):
    """all_reduce_dtype="bfloat16" with a pack per variable: the same weights as float32's
    one pack, to bfloat16's precision."""
    kernels = {}
    for reduction in ("float32", "bfloat16_packs"):
        model_dir = str(tmp_path / reduction)
        results = run_workers([_job(model_dir, 100, "train_and_evaluate", reduction)] * 2,
                               free_ports(2), 240)
        for _, stderr, code in results:
            assert code == 0, stderr[-2000:]
        kernels[reduction] = tf.train.load_variable(model_dir, "kernel")
    difference = abs(kernels["bfloat16_packs"] - kernels["float32"]).max()
    assert 0 < difference < 0.02 * abs(kernels["float32"]).max()


def test_multi_worker_per_replica_variable_save_stalls_until_watchdog(model_dir):
    """An ON_READ (SUM) variable is summed across workers when the chief saves it; the
    other workers never join that collective (worker 1 ends, its steps done), so the save
    stalls until the watchdog ends the chief."""
    results = run_workers([_job(model_dir, 100, "train_and_evaluate", "count")] * 2,
                           free_ports(2), 240)
    _, chief_stderr, chief_code = results[0]
    assert chief_code != 0
    assert re.search(r"^watchdog: worker 0 made no training progress for 15 s "
                     r"\(collective_timeout\)", chief_stderr, re.M), (
        chief_stderr[-2000:])


def _kill_peer_after_step_50(model_dir, tmp_path, *options):
    """Starts two workers, kills worker 1 at step 50; returns (worker 0, its log path)."""
    ports = free_ports(2)
    paths = [tmp_path / f"worker{i}.log" for i in range(2)]
    workers = []
    for i, path in enumerate(paths):
        with open(path, "w") as log:
            workers.append(subprocess.Popen(
                _job(model_dir, 10**7, "train_and_evaluate", *options),
                env=worker_env(ports, i), stdout=log, stderr=log))
    deadline = time.monotonic() + 180
    try:
        # The newest checkpoint, not model.ckpt-50 itself: at hundreds of steps a second
        # that one is deleted (max_to_keep) within a second of its save.
        while (checkpoint_step.newest_step(model_dir) or 0) < 50:
            assert time.monotonic() < deadline, "training never reached step 50"
            assert all(w.poll() is None for w in workers), "a worker ended before step 50"
            time.sleep(0.5)
    finally:
        workers[1].kill()
    return workers[0], paths[0]


@pytest.mark.alone
def test_multi_worker_dead_peer_fails_instead_of_hanging(model_dir, tmp_path):
    survivor, log = _kill_peer_after_step_50(model_dir, tmp_path)
    try:
        code = survivor.wait(timeout=150)
    finally:
        survivor.kill()
    assert code != 0
    text = log.read_text()
    assert ("PeerLostError: multi-worker training lost a peer" in text
            or "watchdog: worker 0 made no training progress" in text), text[-2000:]


def test_multi_worker_dead_peer_without_hook_never_ends(model_dir, tmp_path):
    """The fact behind PeerFailureHook: without it the survivor does not exit (its session
    is re-created after each failed collective, or it waits in one)."""
    survivor, _ = _kill_peer_after_step_50(model_dir, tmp_path, "no_peer_hook")
    try:
        time.sleep(30)
        still_running = survivor.poll() is None
    finally:
        survivor.kill()
    assert still_running


def test_multi_worker_estimator_train_alone_refused(python_run, model_dir):
    """The fact behind estimator_dist.mends.cluster_train: with TF_CONFIG set and a plain
    RunConfig, train() is refused."""
    env = {"TF_CONFIG": worker_env(free_ports(1), 0)["TF_CONFIG"]}
    result = python_run(_job(model_dir, 5, "train", "plain_run_config")[1:], timeout=120,
                        env=env)
    assert result.returncode != 0
    assert "Only `STANDALONE_CLIENT` mode is supported when you call `estimator.train`" in (
        result.stderr)


def test_multi_worker_estimator_train_alone_runs_with_make_run_config(python_run, model_dir):
    env = {"TF_CONFIG": worker_env(free_ports(1), 0)["TF_CONFIG"]}
    result = python_run(_job(model_dir, 5, "train")[1:], timeout=120, env=env)
    assert result.returncode == 0 and "FINISHED" in result.stdout, result.stderr[-2000:]
    assert tf.train.latest_checkpoint(model_dir).endswith("model.ckpt-5")


def _deadlock_probe(tmp_path, session_config):
    """Plain TF in TF2 behaviour: two logical CPU devices, ``MirroredStrategy`` with its
    default cross-device ops, the Estimator's session config ``session_config`` (None:
    ``RunConfig``'s own); prints the devices the Estimator's session has."""
    return f"""
import estimator_dist  # tf.estimator on TF 2.16+ (no other mend without make_run_config)
import tensorflow as tf
import estimator_dist  # tf.estimator on TF 2.16+; builds no strategy
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
from tests.programs import tf1_models
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
print("CROSS_DEVICE_OPS", type(strategy.extended._cross_device_ops).__name__)
class Devices(tf.compat.v1.train.SessionRunHook):
    def after_create_session(self, session, coord):
        print("SESSION_DEVICES", [d.name.split("/")[-1] for d in session.list_devices()],
              flush=True)
config = tf.estimator.RunConfig(model_dir={str(tmp_path)!r}, train_distribute=strategy,
                                session_config={session_config})
x, y = tf1_models.regression_data()
estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                   params={{"learning_rate": 0.1}})
estimator.train(tf1_models.context_input_fn(x, y, 16), max_steps=3, hooks=[Devices()])
print("FINISHED")
"""


def test_default_cross_device_ops_deadlock_on_cpu_replicas_in_tf2_behaviour(python_run,
                                                                          tmp_path):
    """The hang behind the package's explicit session config, exactly: TF2 behaviour
    (``MirroredStrategy`` picks ``CollectiveAllReduce``), two CPU devices made with
    ``tf.config.set_logical_device_configuration`` and ``RunConfig`` without a
    ``session_config``. Estimator's default session config has no ``device_count``, so
    its session has one CPU device; soft placement puts both replicas there, and the
    all-reduce of the two replicas on one device never completes.

    The same program with ``session_config=ConfigProto(device_count={"CPU": 2})`` (still
    the default ``CollectiveAllReduce``, the inter-op pool as small as the core count)
    finishes: ``HANG_MARGIN_SECONDS`` after it finished, the default one has not.
    TF1 behaviour picks ``ReductionToOneDevice`` and trains, both replicas on ``CPU:0``
    (``test_behaviour_facts.py::test_mirrored_defaults_train_in_tf1_behaviour``)."""
    with WatchedPython(["-c", _deadlock_probe(tmp_path / "default", None)]) as default:
        result = python_run(["-c", _deadlock_probe(
            tmp_path / "count", 'tf.compat.v1.ConfigProto(device_count={"CPU": 2})')],
            timeout=120)
        assert "FINISHED" in result.stdout, result.stderr[-2000:]
        assert "CROSS_DEVICE_OPS CollectiveAllReduce" in result.stdout
        assert "SESSION_DEVICES ['device:CPU:0', 'device:CPU:1']" in result.stdout
        assert default.outlives(HANG_MARGIN_SECONDS), default.output[-2000:]
    assert "CROSS_DEVICE_OPS CollectiveAllReduce" in default.output
    assert "SESSION_DEVICES ['device:CPU:0']" in default.output, default.output[-2000:]
    assert "FINISHED" not in default.output, "the defaults no longer deadlock here"
