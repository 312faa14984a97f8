"""The fault suite (docs/errors.md, "Faults"): damaged checkpoints, bad data, bad numbers,
unbounded settings and failing writes. Every refused run is one line on stderr, exit 2
(1 for a full disk), and leaves the model dir byte for byte as it was; a damaged newest
checkpoint is fallen back from, never written over.

Each entry of ``REFUSED``: (id, flags, files to create, message regex). In the flags,
``{trained}`` is a copy of a dense run with checkpoints at steps 0, 2 and 4, ``{tmp}`` a
scratch directory; ``{fresh}`` a path nothing exists at, which must still not exist.
"""
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from estimator_dist.job import checkpoints, model_dir_lock, training
from estimator_dist.commands.migrate import main as migrate_main
from estimator_dist.job.settings import RunSettings
from estimator_dist.commands.report import main as report_main
from input_fns import write_tfrecords
from tests.support import REPO_ROOT
from tests.train_support import keep_tf_logging, run_main, snapshot  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240),
              pytest.mark.usefixtures("keep_tf_logging")]

_PREFIX = "python -m estimator_dist.train: error: "
_ROWS = [f"{i % 5 * 0.1:.1f},{i % 7 * 0.2:.1f},{i % 3 * 0.3:.1f},{i % 3}" for i in range(40)]


def _csv(*rows, header="a,b,c,label"):
    return "\n".join([header, *rows]) + "\n"


REFUSED = [
    # Data contents, found by the first pass before anything is written.
    ("data-ragged-row", ["--train-data", "{tmp}/d.csv"], {"d.csv": _csv(*_ROWS, "1,2,0")},
     r"train_data records must have the header's 4 fields\. Received: 3 fields at .*d\.csv "
     r"line 42"),
    ("data-non-numeric", ["--train-data", "{tmp}/d.csv"], {"d.csv": _csv("1,x,2,0", *_ROWS)},
     r"train_data records must hold numeric fields\. Received: 'x' at .*d\.csv line 2"),
    ("data-header-only", ["--train-data", "{tmp}/d.csv"], {"d.csv": _csv()},
     r"train_data must hold records\. Received: no records in \['.*d\.csv'\]"),
    ("data-label-out-of-range", ["--train-data", "{tmp}/d.csv"],
     {"d.csv": _csv(*_ROWS, "1,2,3,7")},
     r"train_data records must have a label in \[0, 3\)\. Received: label=7 at .*line 42"),
    ("data-nan", ["--train-data", "{tmp}/d.csv"], {"d.csv": _csv(*_ROWS[:5], "nan,1,2,0")},
     r"train_data records must hold finite numbers \(no NaN or Inf\)\. Received: nan at "
     r".*d\.csv line 7"),
    ("data-not-utf8", ["--train-data", "{tmp}/d.csv"],
     {"d.csv": b"a,b,c,label\n1,2,3,0\n\xe9,1,2,0\n"},
     r"train_data records must be UTF-8 text\. Received: byte 0xe9 at .*d\.csv after record 1"),
    ("data-tfrecord-truncated", ["--train-data", "{tmp}/truncated.tfrecord"], {},
     r"train_data records must be whole \(the file is corrupt or truncated\)\. Received: .* "
     r"at .*truncated\.tfrecord record 39"),
    ("data-tfrecord-crc", ["--train-data", "{tmp}/crc.tfrecord"], {},
     r"train_data records must be whole .* at .*crc\.tfrecord record 1"),
    ("data-tfrecord-wrong-shape", ["--train-data", "{tmp}/shapes.tfrecord"], {},
     r"train_data records must have the 3 values of x of the first record\. Received: 4 at "
     r".*shapes\.tfrecord record 20"),
    ("eval-data-other-width", ["--train-data", "{tmp}/t.csv", "--eval-data", "{tmp}/e.csv"],
     {"t.csv": _csv(*_ROWS), "e.csv": _csv(*[r + ",1" for r in _ROWS], header="a,b,c,label,d")},
     r"eval_data must have the 3 values of x per record that train_data has\. Received: 4"),
    ("eval-data-below-one-batch", ["--train-data", "{tmp}/t.csv", "--batch-size", "16"],
     {"t.csv": _csv(*_ROWS[:10])},
     r"eval data must hold at least one batch \(16 examples\), or evaluation sees none\. "
     r"Received: 10 examples"),
    ("resume-other-width", ["--train-data", "{tmp}/t.csv", "--batch-size", "8",
                            "--model-dir", "{trained}"],
     {"t.csv": _csv(*_ROWS)},
     r"train_data must give x the shape the checkpoint was trained on; .*Received: x of shape "
     r"\[3\] \(variable hidden_0/kernel is \[16, 4\] in model\.ckpt-4, \[3, 4\] with this data"),
    ("export-dir-is-a-file", ["--export-dir", "{tmp}/file"], {"file": "x\n"},
     r"export_dir must be a directory\. Received: export_dir='.*file' \(it is a file\)"),
    # Numbers and bounds.
    ("learning-rate-infinite", ["--param", "learning_rate=Infinity"], {},
     r"params\.learning_rate must be finite numbers\. Received: params\.learning_rate=inf"),
    ("max-steps-too-large", ["--max-steps", str(2**63)], {},
     r"max_steps must be at most 2,147,483,647\. Received: max_steps=9223372036854775808"),
    ("checkpoints-too-many", ["--max-steps", "1000000000000", "--save-checkpoints-steps", "1"],
     {}, r"max_steps must be at most"),
    ("checkpoints-too-frequent", ["--max-steps", "1000000", "--save-checkpoints-steps", "1"],
     {}, r"save_checkpoints_steps must leave at most 10,000 checkpoints .* so at least 100\. "
         r"Received: save_checkpoints_steps=1"),
    ("replicas-too-many", ["--strategy", "mirrored", "--num-replicas", "1000"], {},
     r"num_replicas must be at most 64\. Received: num_replicas=1000"),
    # Config files and flags that would do nothing.
    ("config-alias-bomb", ["--config", "{tmp}/bomb.yaml"],
     {"bomb.yaml": "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a]\n"},
     r"config file must be valid YAML\. Received: '.*bomb\.yaml' \(aliases \(\*a\) are not "
     r"allowed in settings"),
    ("config-duplicate-key", ["--config", "{tmp}/dup.yaml"],
     {"dup.yaml": "max_steps: 3\nmax_steps: 4\n"},
     r"config file must be valid YAML\. Received: '.*dup\.yaml' \(duplicate key 'max_steps' "
     r"at line 2\)"),
    ("config-duplicate-key-json", ["--config", "{tmp}/dup.json"],
     {"dup.json": '{"max_steps": 3, "max_steps": 4}'},
     r"config file must be valid JSON\. Received: '.*dup\.json' \(duplicate key 'max_steps'\)"),
    ("config-not-utf8", ["--config", "{tmp}/latin.yaml"], {"latin.yaml": b"seed: \xe9\n"},
     r"config file must be UTF-8 text\. Received: '.*latin\.yaml' \(byte 0xe9 at offset 6\)"),
    ("tpu-name-without-tpu", ["--tpu-name", "my-tpu"], {},
     r"tpu_name applies to strategy='tpu' only\. Received: tpu_name='my-tpu' with "
     r"strategy='default'"),
    ("export-dir-without-export", ["--export-dir", "{tmp}/out", "--no-export"], {},
     r"export_dir applies to export=True only\. Received: export_dir='.*out' with "
     r"export=False"),
    # TF_CONFIG.
    ("tf-config-bad-port", ["--strategy", "multi_worker", "--env", "TF_CONFIG",
                            '{"cluster": {"worker": ["127.0.0.1:abc"]}, '
                            '"task": {"type": "worker", "index": 0}}'], {},
     r"TF_CONFIG cluster ports must be ints in \[1, 65535\]\. Received: worker "
     r"'127\.0\.0\.1:abc'"),
    ("tf-config-stray", ["--env", "TF_CONFIG",
                         '{"cluster": {"worker": ["127.0.0.1:2222"]}, '
                         '"task": {"type": "worker", "index": 0}}'], {},
     r"TF_CONFIG applies to strategies multi_worker, parameter_server only; unset it, or pass "
     r"one of them\. Received: strategy='default' with TF_CONFIG set"),
    # Checkpoints.
    ("checkpoints-none-intact", ["--model-dir", "{trained}", "--max-steps", "6"],
     {"@damage": "index"},
     r"model_dir must hold an intact checkpoint to resume \(nothing was changed; .*\)\. "
     r"Received: .*model\.ckpt-4: .*model\.ckpt-0: "),
    ("checkpoint-state-outside-none-intact",
     ["--model-dir", "{trained}", "--max-steps", "25", "--no-export"],
     {"@damage": "index", "@state": 'model_checkpoint_path: "../elsewhere/model.ckpt-2"\n'},
     r"model_dir must hold an intact checkpoint to resume .*model\.ckpt-0: .*; the checkpoint "
     r"state file names '.*\.\./elsewhere/model\.ckpt-2', outside the model dir\)"),
]
_IDS = [entry[0] for entry in REFUSED]


def _write_tfrecords(tmp_path):
    x = np.arange(120, dtype=np.float32).reshape(40, 3) / 100
    path = write_tfrecords({"x": x}, tmp_path / "good", num_shards=1, labels=np.arange(40) % 3)[0]
    data = open(path, "rb").read()
    (tmp_path / "truncated.tfrecord").write_bytes(data[:-20])
    corrupt = bytearray(data)
    corrupt[len(data) // 40 + 20] ^= 0xFF  # Inside record 1.
    (tmp_path / "crc.tfrecord").write_bytes(bytes(corrupt))
    wide = write_tfrecords({"x": np.ones([20, 4], np.float32)}, tmp_path / "wide", num_shards=1,
                           labels=np.zeros(20, np.int64))[0]
    (tmp_path / "shapes.tfrecord").write_bytes(data[:len(data) // 2] + open(wide, "rb").read())


@pytest.fixture(scope="module")
def trained_once(tmp_path_factory):
    """A dense run (hidden_units [4]) with checkpoints at steps 0, 2 and 4, no export."""
    model_dir = str(tmp_path_factory.mktemp("faults") / "trained")
    training.run(RunSettings(max_steps=4, save_checkpoints_steps=2, export=False,
                             params={"hidden_units": [4]}, model_dir=model_dir),
                 stream=open(os.devnull, "w"))
    return model_dir


@pytest.fixture
def trained(trained_once, tmp_path):
    """A fresh copy of ``trained_once`` for one test to damage."""
    return shutil.copytree(trained_once, str(tmp_path / "trained"))


def _damage(model_dir, how):
    """Damages the checkpoints: "data" truncates the newest data file, "index" every index."""
    if how == "data":
        with open(os.path.join(model_dir, "model.ckpt-4.data-00000-of-00001"), "r+b") as file:
            file.truncate(100)
    else:
        for step in (0, 2, 4):
            with open(os.path.join(model_dir, f"model.ckpt-{step}.index"), "r+b") as file:
                file.truncate(10)


def _prepare(argv, files, tmp_path, trained, monkeypatch):
    _write_tfrecords(tmp_path)
    for name, content in files.items():
        if name == "@damage":
            _damage(trained, content)
        elif name == "@state":
            with open(os.path.join(trained, checkpoints.STATE_FILE), "w",
                      encoding="utf-8") as file:
                file.write(content)
        elif isinstance(content, bytes):
            (tmp_path / name).write_bytes(content)
        else:
            (tmp_path / name).write_text(content)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    if "--env" in argv:
        at = argv.index("--env")
        monkeypatch.setenv(argv[at + 1], argv[at + 2])
        argv = argv[:at] + argv[at + 3:]
    fresh = str(tmp_path / "fresh")
    if "--model-dir" not in argv:
        argv = argv + ["--model-dir", "{fresh}"]
    return [a.format(tmp=tmp_path, fresh=fresh, trained=trained) for a in argv], fresh


@pytest.mark.parametrize("entry", REFUSED, ids=_IDS)
def test_fault_refused_in_one_line_and_model_dir_unchanged(entry, trained, tmp_path, capsys,
                                                          monkeypatch):
    _, argv, files, message = entry
    argv, fresh = _prepare(argv, files, tmp_path, trained, monkeypatch)
    before = snapshot(trained)
    code, _, err = run_main(argv, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(_PREFIX), err
    assert re.search(message, err), err
    assert snapshot(trained) == before
    assert not os.path.exists(fresh)


def test_fault_refused_with_verbose_shows_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    (tmp_path / "d.csv").write_text(_csv("1,2,0"))
    with pytest.raises(ValueError, match="header's 4 fields"):
        run_main(["--train-data", tmp_path / "d.csv", "--model-dir", tmp_path / "m",
                  "--verbose"], capsys)
    assert not os.path.exists(tmp_path / "m")


def test_bad_record_past_the_checked_sample_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    rows = (_ROWS * 28)[:1100]
    rows[1050] = "1,2,0"  # Past the first 1,000 records that are checked up front.
    (tmp_path / "d.csv").write_text(_csv(*rows))
    code, _, err = run_main(["--train-data", tmp_path / "d.csv", "--batch-size", 50,
                             "--max-steps", 50, "--no-export", "--model-dir", tmp_path / "m"],
                            capsys)
    assert code == 2
    assert err.count("\n") == 1 and re.search(
        r"error: train_data and eval_data must hold valid records; the checkpoints saved so far "
        r"are kept\. Received: bad CSV record at .*d\.csv line 1052: expected 4 fields, found 3",
        err), err


def test_resume_after_refused_other_width_still_resumes(trained, tmp_path, capsys):
    (tmp_path / "t.csv").write_text(_csv(*_ROWS))
    code, _, err = run_main(["--train-data", tmp_path / "t.csv", "--batch-size", 8,
                             "--model-dir", trained], capsys)
    assert code == 2 and "the shape the checkpoint was trained on" in err, err
    code, out, err = run_main(["--model-dir", trained, "--max-steps", 6], capsys)
    assert code == 0, err
    assert "Resuming dense at step 4 to step 6" in out


def _files_of(model_dir, step):
    return {k: v for k, v in snapshot(model_dir).items()
            if k.startswith(f"model.ckpt-{step}.")}


def _elsewhere(trained, relative):
    """A state file naming a copy of ``trained``'s model.ckpt-2 outside the model dir (a
    resume that followed it would start at step 2, not 4)."""
    other = os.path.join(os.path.dirname(trained), "elsewhere")
    os.makedirs(other)
    for path in _files_of(trained, 2):
        shutil.copy(os.path.join(trained, path), other)
    target = "../elsewhere/model.ckpt-2" if relative else os.path.join(other, "model.ckpt-2")
    return f'model_checkpoint_path: "{target}"\nall_model_checkpoint_paths: "{target}"\n'


_STATES = {
    "state-garbage": lambda trained: "{garbage\n",
    "state-dangling": lambda trained: 'model_checkpoint_path: "model.ckpt-9"\n',
    "state-empty": lambda trained: "",
    "state-binary": lambda trained: b"\x00\xff\xfe\x10model.ckpt-4",
    "state-outside-relative": lambda trained: _elsewhere(trained, relative=True),
    "state-outside-absolute": lambda trained: _elsewhere(trained, relative=False),
}


@pytest.mark.parametrize("damage,named,restored", [
    ("data", "model.ckpt-4 (", "model.ckpt-2"),
    ("state-garbage", "the checkpoint state file does not parse", "model.ckpt-4"),
    ("state-dangling", "model.ckpt-9 (missing)", "model.ckpt-4"),
    ("state-empty", "the checkpoint state file is empty (", "model.ckpt-4"),
    ("state-binary", "the checkpoint state file is not a text state file (", "model.ckpt-4"),
    ("state-outside-relative", "elsewhere/model.ckpt-2', outside the model dir (",
     "model.ckpt-4"),
    ("state-outside-absolute", "elsewhere/model.ckpt-2', outside the model dir (",
     "model.ckpt-4"),
])
def test_damaged_checkpoint_falls_back_to_intact_one(damage, named, restored, trained,
                                                     capsys):
    state = os.path.join(trained, checkpoints.STATE_FILE)
    if damage == "data":
        _damage(trained, "data")
    else:
        content = _STATES[damage](trained)
        with open(state, "wb") as file:
            file.write(content if isinstance(content, bytes) else content.encode())
    damaged = {k: v[1] for k, v in snapshot(trained).items()
               if k == "checkpoint" or k.startswith("model.ckpt-4.")}
    # Estimator re-saves the checkpoint it restores (same step, same values): its data and
    # index stay byte-identical, its .meta graph is written anew.
    kept = {k: v[1] for k, v in {**_files_of(trained, 0), **_files_of(trained, 2)}.items()
            if not k.startswith(f"{restored}.meta")}
    code, out, err = run_main(["--model-dir", trained, "--max-steps", 6, "--no-export"], capsys)
    assert code == 0, err
    warning = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and named in warning[0] and f"resuming from {restored}" in warning[0]
    assert f"Resuming dense at step {restored.rsplit('-', 1)[1]} to step 6" in out
    aside = re.search(r"kept, unchanged, in (\S+)\)", warning[0]).group(1)
    moved = {os.path.relpath(k, os.path.basename(aside)): v[1]
             for k, v in snapshot(os.path.dirname(aside)).items()
             if k.startswith(os.path.basename(aside) + os.sep)}
    if damage == "data":
        assert moved == damaged  # The damaged checkpoint and the old state file, unchanged.
    else:
        assert moved == {"checkpoint": damaged["checkpoint"]}
    assert {k: v[1] for k, v in snapshot(trained).items() if k in kept} == kept
    assert tf.train.latest_checkpoint(trained).endswith("model.ckpt-6")


def test_damaged_checkpoint_under_cluster_strategy_refused(trained, capsys, monkeypatch):
    _damage(trained, "data")
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["127.0.0.1:2222"]}, '
                                    '"task": {"type": "chief", "index": 0}}')
    before = snapshot(trained)
    code, _, err = run_main(["--model-dir", trained, "--strategy", "multi_worker"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert re.search(r"run once, without TF_CONFIG, with --strategy default --max-steps 2 "
                     r"--no-export to fall back\. Received: checkpoint model\.ckpt-4 \(", err), err
    assert snapshot(trained) == before


def test_damaged_checkpoints_to_step_0_under_cluster_strategy_advise_max_steps_1(
        trained, capsys, monkeypatch):
    for step in (2, 4):
        with open(os.path.join(trained, f"model.ckpt-{step}.data-00000-of-00001"),
                  "r+b") as file:
            file.truncate(100)
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["127.0.0.1:2222"]}, '
                                    '"task": {"type": "chief", "index": 0}}')
    code, _, err = run_main(["--model-dir", trained, "--strategy", "multi_worker"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "--strategy default --max-steps 1 --no-export to fall back" in err, err


def test_disk_full_during_training_is_one_line_exit_1(trained, capsys, monkeypatch):
    def full(*_, **__):
        raise tf.errors.ResourceExhaustedError(
            None, None, "model.ckpt-6.data-00000-of-00001: No space left on device")

    monkeypatch.setattr(tf.estimator.Estimator, "train", full)
    code, _, err = run_main(["--model-dir", trained, "--max-steps", 6, "--no-export"], capsys)
    assert code == 1
    assert err.count("\n") == 1 and re.search(
        r"error: model_dir needs free disk space; the checkpoints saved so far are kept .*"
        r"Received: No space left on device under .*trained", err), err


def test_disk_full_writing_run_json_names_it(tmp_path, capsys, monkeypatch):
    def full(*_):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # As a write() fails: no file.

    monkeypatch.setattr(training.run_record, "write", full)
    model_dir = str(tmp_path / "m")
    code, _, err = run_main(["--model-dir", model_dir, "--max-steps", 2], capsys)
    assert code == 1 and err.count("\n") == 1, err
    assert err.endswith(f"model_dir needs free disk space. Received: No space left on device "
                        f"writing {os.path.join(model_dir, 'run.json')}\n"), err
    assert not os.path.exists(model_dir_lock.path(model_dir))


def test_disk_full_during_training_removes_partial_writes(trained, capsys, monkeypatch):
    partial = ["checkpoint.tmp" + "0" * 32, "model.ckpt-6_temp/part-00000-of-00001.data",
               "model.ckpt-6.data-00000-of-00001.tempstate123", "export/temp-1700000000/x"]

    def full(*_, **__):
        for name in partial:
            os.makedirs(os.path.dirname(os.path.join(trained, name)), exist_ok=True)
            with open(os.path.join(trained, name), "w", encoding="utf-8") as file:
                file.write("half")
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    before = snapshot(trained)
    monkeypatch.setattr(tf.estimator.Estimator, "train", full)
    code, _, err = run_main(["--model-dir", trained, "--max-steps", 6, "--no-export"], capsys)
    assert code == 1 and "needs free disk space" in err
    left = {os.path.relpath(os.path.join(root, name), trained)
            for root, dirs, files in os.walk(trained) for name in files + dirs}
    assert not any(p.startswith(("checkpoint.tmp", "model.ckpt-6", "export/temp")) for p in left)
    assert set(before) <= left  # Whole checkpoints, events and run.json stay.


@pytest.mark.parametrize("output,message", [
    ("{tmp}/dir.png", r"output must be a file path\. Received: output='.*dir\.png' \(it is a "
                      r"directory\)"),
    ("{tmp}/file/c.png", r"output must be a path that can be written\. Received: "
                         r"output='.*file/c\.png' \('.*file' is a file\)"),
])
def test_report_output_unwritable_is_one_line(output, message, trained, tmp_path, capsys):
    (tmp_path / "dir.png").mkdir()
    (tmp_path / "file").write_text("x\n")
    before = snapshot(trained)
    code = report_main(["--model-dir", trained, "--output", output.format(tmp=tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and re.search(message, err), err
    assert snapshot(trained) == before


def test_report_disk_full_is_one_line_exit_1(trained, tmp_path, capsys, monkeypatch):
    from matplotlib import figure  # Late: optional (the report extra).

    def full(*_, **__):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(figure.Figure, "savefig", full)
    code = report_main(["--model-dir", trained, "--output", str(tmp_path / "c.png")])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert re.search(r"output needs free disk space\. Received: No space left on device "
                     r"writing .*c\.png", err), err


def test_migrate_falls_back_from_a_damaged_newest_checkpoint_and_moves_nothing(
        trained, tmp_path, capsys):
    _damage(trained, "data")
    before = snapshot(trained)
    code = migrate_main(["--model-dir", trained, "--output", str(tmp_path / "keras")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err.count("\n") == 1 and re.match(
        r"warning: checkpoint model\.ckpt-4 \(.*\) cannot be restored; converting "
        r"model\.ckpt-2, the newest intact checkpoint \(the model dir is left as it is\)", err), err
    assert re.search(r"checkpoint  .*model\.ckpt-2\n", out), out
    assert snapshot(trained) == before


@pytest.mark.multi_process
@pytest.mark.both_ends
def test_second_run_into_a_live_model_dir_refused_and_first_unharmed(trained_once, tmp_path,
                                                                      capsys):
    model_dir = str(tmp_path / "shared")
    first = subprocess.Popen(  # Long enough to outlive the second run's check.
        [sys.executable, "-m", "estimator_dist.train", "--model-dir", model_dir,
         "--max-steps", "4000", "--no-export"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
        env={k: v for k, v in os.environ.items() if k != "TF_CONFIG"})
    try:
        lock = model_dir_lock.path(model_dir)
        deadline = time.monotonic() + 120
        while not os.path.exists(lock):
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGSTOP)  # Paused past the heartbeat's bound: still its.
        try:
            stamp = time.time() - model_dir_lock.STALE_SECONDS - 10
            os.utime(lock, (stamp, stamp))
            code, _, err = run_main(["--model-dir", model_dir, "--max-steps", 4000,
                                     "--no-export"], capsys)
        finally:
            os.kill(first.pid, signal.SIGCONT)
        out, first_err = first.communicate(timeout=180)
    finally:
        first.kill()
    assert code == 2 and err.count("\n") == 1, err
    assert re.search(rf"{_PREFIX}model_dir must not be in use by another run .*Received: "
                     rf"model_dir='.*shared' held by pid {first.pid} on host '.+', running "
                     rf"since \d{{4}}-", err), err
    assert first.returncode == 0, first_err
    assert "training   4000 steps" in out and "step 4000)" in out, out
    assert tf.train.latest_checkpoint(model_dir).endswith("model.ckpt-4000")
    assert not os.path.exists(lock)  # Released on exit.


def test_stale_lock_of_a_dead_run_taken_over(trained, capsys):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, timeout=60, check=True)
    with open(model_dir_lock.path(trained), "w", encoding="utf-8") as file:
        json.dump({"host": socket.gethostname(), "pid": int(dead.stdout), "token": "dead",
                   "started": "2024-01-01T00:00:00+00:00"}, file)
    code, out, err = run_main(["--model-dir", trained, "--max-steps", 6, "--no-export"], capsys)
    assert code == 0 and err == "", err
    assert "Resuming dense at step 4 to step 6" in out
    assert not os.path.exists(model_dir_lock.path(trained))


def test_run_ended_by_an_error_releases_the_lock(tmp_path, capsys):
    model_dir = str(tmp_path / "nan")
    code, _, err = run_main(["--model-dir", model_dir, "--max-steps", 30,
                             "--param", "learning_rate=1e12", "--no-export"], capsys)
    assert code == 2 and "loss must stay finite" in err, err
    assert os.path.exists(os.path.join(model_dir, "run.json"))  # It held the lock, and
    assert not os.path.exists(model_dir_lock.path(model_dir))  # gave it back.


_HARD_EXIT_MID_RUN = """
import sys
import tensorflow as tf
from estimator_dist import process_exit
from estimator_dist.commands.train import main

def train(*_, **__):  # As a guard ends a task blocked in TensorFlow: no finally runs.
    process_exit.end(1, "guard: ended")

tf.estimator.Estimator.train = train
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.both_ends
def test_hard_exit_mid_run_releases_the_lock(tmp_path, python_run):
    model_dir = str(tmp_path / "m")
    done = python_run(["-c", _HARD_EXIT_MID_RUN, "--model-dir", model_dir, "--max-steps",
                       "2"], timeout=180)
    assert done.returncode == 1 and done.stderr.endswith("guard: ended\n"), done.stderr
    assert os.path.exists(os.path.join(model_dir, "run.json"))  # It held the lock, and
    assert not os.path.exists(model_dir_lock.path(model_dir))  # gave it back.


@pytest.mark.both_ends
def test_remote_model_dir_trains_and_resumes_and_a_missing_scheme_is_one_line(
        tmp_path, capsys, monkeypatch, python_run):
    monkeypatch.chdir(tmp_path)  # Where a path such as gs://b/m would become gs:/b/m.
    bucket = f"ram://bucket-{os.getpid()}/run"
    code, out, err = run_main(["--model-dir", bucket, "--max-steps", 2, "--no-export"], capsys)
    assert code == 0 and err == "", err
    code, out, err = run_main(["--model-dir", bucket, "--max-steps", 4], capsys)
    assert code == 0 and "Resuming dense at step 2 to step 4" in out, err
    assert {"run.json", "model.ckpt-4.index"} <= set(tf.io.gfile.listdir(bucket))
    assert not tf.io.gfile.exists(model_dir_lock.path(bucket))
    assert os.listdir(tmp_path) == []
    done = python_run(["-m", "estimator_dist.train", "--model-dir", "hdfs://namenode/runs/a"],
                      timeout=120, cwd=str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert re.search(r"error: model_dir must be on a file system this TensorFlow has: there "
                     r"is no filesystem for scheme 'hdfs' in this TensorFlow .* Received: "
                     r"model_dir='hdfs://namenode/runs/a'\n$", done.stderr), done.stderr
    assert os.listdir(tmp_path) == []


def test_docs_table_lists_every_fault():
    with open(os.path.join(REPO_ROOT, "docs", "errors.md"), encoding="utf-8") as file:
        documented = re.findall(r"^\| `([a-z0-9-]+)` \|", file.read(), flags=re.MULTILINE)
    assert documented == _IDS


def test_fallback_and_data_check_under_disable_v2_behavior(trained, tmp_path, python_run):
    _damage(trained, "data")
    (tmp_path / "d.csv").write_text(_csv(*_ROWS[:5], "nan,1,2,0"))
    code = ("import sys\n"
            "import tensorflow as tf\n"
            "tf.compat.v1.disable_v2_behavior()\n"
            "from estimator_dist import train\n"
            "bad = train.main(['--model-dir', sys.argv[1] + '-new', '--train-data', sys.argv[2]])\n"
            "sys.exit(bad * 10 + train.main(['--model-dir', sys.argv[1], '--max-steps', '6',\n"
            "                                '--no-export']))\n")
    done = python_run(["-c", code, trained, str(tmp_path / "d.csv")], timeout=200)
    assert done.returncode == 20, done.stderr[-2000:]
    assert "must hold finite numbers (no NaN or Inf)" in done.stderr
    assert re.search(r"warning: checkpoint model\.ckpt-4 \(.*resuming from model\.ckpt-2",
                     done.stderr), done.stderr[-2000:]
    assert tf.train.latest_checkpoint(trained).endswith("model.ckpt-6")
