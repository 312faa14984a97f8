"""``estimator.train`` on a cluster (mend ``cluster_train``): a second Estimator of a task's
process with another session_config is refused in one line."""
import sys

import pytest
import tensorflow as tf
from tensorflow.python.distribute import distribute_coordinator as dc

from estimator_dist import mends
from estimator_dist.errors import UsageError
from estimator_dist.mends import cluster_train
from tests.support import run_pythons


@pytest.fixture
def started_server(monkeypatch):
    """This thread's coordinator as if its server had started with no session_config."""
    monkeypatch.setattr(dc._thread_local, "server", object(), raising=False)
    monkeypatch.setattr(dc._thread_local, "session_config_str", repr(None), raising=False)


def test_same_session_config_as_the_server_passes(started_server):
    cluster_train._check_server_config(None)


def test_other_session_config_than_the_server_refused_naming_both(started_server):
    other = tf.compat.v1.ConfigProto(device_count={"GPU": 0})
    with pytest.raises(UsageError) as error:
        cluster_train._check_server_config(other)
    assert str(error.value).startswith("session_config: a cluster task's TensorFlow server")
    assert 'Received: session_config device_count { key: "GPU" value: 0 }, the server\'s None' \
        in str(error.value)
    assert "\n" not in str(error.value)


def test_no_server_yet_passes(monkeypatch):
    monkeypatch.setattr(dc._thread_local, "server", None, raising=False)
    cluster_train._check_server_config(tf.compat.v1.ConfigProto(device_count={"GPU": 0}))


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(400)
def test_later_estimators_of_a_task_process_meet_the_server_of_the_first(tmp_path):
    """Under TF1 behaviour on two workers, three programs one after another: the first
    trains; the second, whose config replaces the session_config, names the change in one
    line; the third, whose "dense" variables the first made with other shapes, fails on
    them (docs/legacy.md, "Several models in one cluster task's process")."""
    programs = ("iris_custom_estimator", "wide_deep_replace", "keras_model_to_estimator")
    legacy_keras = {} if mends.tensorflow_release() == "2.15" else {"TF_USE_LEGACY_KERAS": "1"}
    result = run_pythons([[
        "-m", "estimator_dist.launch", "--workers", "2", "--timeout", "300", "--",
        sys.executable, "-m", "tests.end_to_end.legacy.runner", *programs, "--behaviour",
        "tf1", "--strategy", "multi_worker", "--model-dir", str(tmp_path)]], timeout=360,
        env=legacy_keras)[0]
    output = result.stdout + result.stderr
    log = result.stdout[-3000:] + result.stderr[-3000:]
    assert f"[worker 0] RESULT {programs[0]} " in result.stdout, log
    assert (f"[worker 0] ERROR {programs[1]} UsageError: session_config: a cluster task's "
            f"TensorFlow server starts once a process") in result.stdout, log
    assert f"ERROR {programs[2]} InvalidArgumentError" in result.stdout, log
    assert "Trying to assign to variable with tensor with wrong shape" in output, log
