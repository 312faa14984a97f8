"""Paths with a scheme, through TensorFlow's file systems (``remote_files``): ``ram://``,
which TensorFlow registers on both ends, stands in for a bucket; ``hdfs://``, which it
registers on neither, for a scheme a user's TensorFlow lacks."""
import json
import uuid

import pytest
import tensorflow as tf

from estimator_dist import remote_files, run_record
from estimator_dist.errors import UsageError
from estimator_dist.job import model_dir_lock
from estimator_dist.job.settings import RunSettings


@pytest.fixture
def bucket():
    """A fresh ``ram://`` directory."""
    path = f"ram://bucket-{uuid.uuid4().hex}/run"
    tf.io.gfile.makedirs(path)
    return path


def test_tensorflow_registers_ram_and_not_hdfs_or_s3():
    assert tf.io.gfile.exists("ram://nothing/here") is False
    for missing in ("hdfs://namenode/run", "s3://bucket/run"):
        with pytest.raises(tf.errors.UnimplementedError, match="File system scheme"):
            tf.io.gfile.exists(missing)


@pytest.mark.parametrize("path, scheme", [("hdfs://namenode/run", "hdfs"),
                                          ("s3://bucket/run", "s3")])
def test_check_reachable_names_a_scheme_this_tensorflow_lacks(path, scheme):
    with pytest.raises(UsageError, match=(
            rf"^model_dir must be on a file system this TensorFlow has: there is no filesystem "
            rf"for scheme '{scheme}' in this TensorFlow \(a package such as tensorflow-io "
            rf"registers more\)\. Received: model_dir='{path}'$")):
        remote_files.check_reachable("model_dir", path)


def test_check_reachable_passes_a_registered_scheme(bucket):
    remote_files.check_reachable("model_dir", bucket)
    remote_files.check_reachable("model_dir", bucket + "/not-yet")


def test_put_is_whole_exclusive_unless_told_and_leaves_no_temporary(bucket):
    target = f"{bucket}/file"
    assert remote_files.put(target, "one", overwrite=False)
    assert not remote_files.put(target, "two", overwrite=False)
    assert remote_files.read(target) == b"one"
    assert remote_files.put(target, b"three", overwrite=True)
    assert remote_files.read(target) == b"three"
    assert tf.io.gfile.listdir(bucket) == ["file"]
    assert not remote_files.staged(target).startswith(target)  # ram:// would see it exist.


def test_errors_come_back_as_os_errors(bucket):
    with pytest.raises(FileNotFoundError):
        remote_files.read(f"{bucket}/missing")
    assert remote_files.status(f"{bucket}/missing") is None
    assert remote_files.status(bucket)["dir"] is True


def test_run_record_written_and_read_back_remotely(bucket):
    settings = RunSettings(max_steps=5, model_dir=bucket)
    assert run_record.load(bucket) is None
    run_record.write(bucket, run_record.make_record(settings, {"train": "built-in"}))
    assert run_record.load(bucket)["settings"]["max_steps"] == 5
    assert tf.io.gfile.listdir(bucket) == [run_record.FILENAME]
    with pytest.raises(UsageError, match="no filesystem for scheme 'hdfs'"):
        run_record.load("hdfs://namenode/run")


def test_lock_held_refused_and_released_remotely(bucket):
    with model_dir_lock.hold(bucket) as held:
        fields = json.loads(remote_files.read(held.path))
        assert fields["token"] == held.holder.token
        with pytest.raises(UsageError, match=r"must not be in use .* held by pid \d+"):
            model_dir_lock.hold(bucket)
        with pytest.raises(UsageError, match="must not be in use"):
            model_dir_lock.check_free(bucket)
    assert tf.io.gfile.listdir(bucket) == []


def test_remote_lock_of_a_dead_process_taken_over_and_a_directory_named(bucket):
    remote_files.write(model_dir_lock.path(bucket), json.dumps(
        {"host": model_dir_lock.socket.gethostname(), "pid": 2**31 - 1, "token": "dead",
         "started": "2024-01-01T00:00:00+00:00"}))
    model_dir_lock.hold(bucket).release()
    assert tf.io.gfile.listdir(bucket) == []
    tf.io.gfile.makedirs(model_dir_lock.path(bucket))
    with pytest.raises(UsageError, match=r"lock must be a lock file .*: it is a directory$"):
        model_dir_lock.hold(bucket)
