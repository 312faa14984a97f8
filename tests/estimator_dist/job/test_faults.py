"""Failures during a run as one-line errors: the data's, the disk's, a symlink's."""
import os
import types

import tensorflow as tf

from estimator_dist.errors import EnvironmentFault, UsageError
from estimator_dist.job import faults


def _settings(train_data=None):
    return types.SimpleNamespace(model_dir="runs/a", train_data=train_data)


def test_runtime_fault_bad_record_of_train_data_names_the_record():
    error = tf.errors.InvalidArgumentError(
        None, None, "{{function_node x}} bad CSV record at a.csv:7: 'x' [Op:IteratorGetNext]")
    fault = faults.runtime_fault(error, _settings(train_data=["a.csv"]))
    assert isinstance(fault, UsageError)
    assert str(fault) == ("train_data and eval_data must hold valid records; the checkpoints "
                          "saved so far are kept. Received: bad CSV record at a.csv:7: 'x' "
                          "[Op:IteratorGetNext")


def test_runtime_fault_bad_record_without_train_data_is_none():
    error = tf.errors.InvalidArgumentError(None, None, "bad CSV record at a.csv:7")
    assert faults.runtime_fault(error, _settings()) is None


def test_runtime_fault_disk_full_is_an_environment_fault():
    error = tf.errors.ResourceExhaustedError(None, None, "runs/a/x; No space left on device")
    fault = faults.runtime_fault(error, _settings())
    assert isinstance(fault, EnvironmentFault)
    assert str(fault).endswith("Received: No space left on device under runs/a")


def test_runtime_fault_other_op_error_is_none():
    error = tf.errors.InternalError(None, None, "something else")
    assert faults.runtime_fault(error, _settings(train_data=["a.csv"])) is None


def test_remove_partial_writes_keeps_whole_checkpoints_and_exports(tmp_path):
    whole = ["model.ckpt-2.index", "checkpoint", "export/1700000000/saved_model.pb"]
    partial = [f"checkpoint.tmp{'0' * 32}", "model.ckpt-4.index.tempstate3",
               "model.ckpt-4_temp/part-0", "export/temp-1700000001/saved_model.pb"]
    for name in whole + partial:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    faults.remove_partial_writes(str(tmp_path))
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == sorted(whole)


def test_path_fault_names_a_dangling_symlink_above_the_path(tmp_path):
    os.symlink(tmp_path / "gone", tmp_path / "link")
    path = str(tmp_path / "link" / "model")
    assert faults.path_fault(path) == (f"{str(tmp_path / 'link')!r} is a dangling symlink: "
                                       "No such file or directory")


def test_path_fault_of_a_plain_path_is_none(tmp_path):
    assert faults.path_fault(str(tmp_path / "model")) is None
