"""The error catalogue (docs/errors.md): every user mistake the train CLI can meet gives
one line on stderr and exit code 2, and leaves an existing model dir as it was.

Each entry: (id, flags, environment, files to create, message regex). In the flags,
``{recorded}`` is a model dir holding a dense run, ``{fresh}`` a path nothing exists at,
``{tmp}`` a scratch directory. An entry without ``--model-dir`` gets ``{fresh}``, which
must still not exist afterwards.
"""
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from estimator_dist.job import training
from estimator_dist.job.settings import RunSettings
from tests.support import REPO_ROOT, handles_signal
from tests.train_support import keep_tf_logging, run_main, snapshot  # noqa: F401

pytestmark = pytest.mark.usefixtures("keep_tf_logging")

_PREFIX = "python -m estimator_dist.train: error: "


def _write_examples(path, count=300, **features):
    """A TFRecord file of ``count`` copies of one Example: ``features`` and label 0."""
    features["label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[0]))
    example = tf.train.Example(features=tf.train.Features(feature=features))
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(count):
            writer.write(example.SerializeToString())

CATALOGUE = [
    ("unknown-flag", ["--max-stesp", "3"], {}, {},
     r"unrecognized arguments: --max-stesp 3 \(did you mean '--max-steps'\?\)"),
    ("bad-flag-choice", ["--model", "cnn"], {}, {},
     r"argument --model: invalid choice: 'cnn' \(choose from 'dense', 'lstm'\)"),
    ("bad-flag-number", ["--max-steps", "0"], {}, {},
     r"argument --max-steps: must be a positive int\. Received: '0'"),
    ("bad-param-syntax", ["--param", "learning_rate"], {}, {},
     r"argument --param: must be KEY=VALUE\. Received: 'learning_rate'"),
    ("unknown-param", ["--param", "learning_rat=0.1"], {}, {},
     r"params must suit model_fn dense_classifier_model_fn: .*learning_rat"),
    ("bad-param-value", ["--param", "learning_rate=-1"], {}, {},
     r"params must suit model_fn dense_classifier_model_fn: learning_rate must be a positive "
     r"number\. Received: learning_rate=-1"),
    ("config-missing", ["--config", "{tmp}/nope.yaml"], {}, {},
     r"config file must be a readable file\. Received: '.*nope\.yaml' \(No such file"),
    ("config-invalid", ["--config", "{tmp}/bad.yaml"], {}, {"bad.yaml": "max_steps: [1\n"},
     r"config file must be valid YAML\. Received: '.*bad\.yaml' \("),
    ("config-unsafe", ["--config", "{tmp}/evil.yaml"], {},
     {"evil.yaml": "!!python/object/apply:os.system ['true']\n"},
     r"config file must be valid YAML\. Received: '.*evil\.yaml' \(could not determine"),
    ("config-not-mapping", ["--config", "{tmp}/list.yaml"], {}, {"list.yaml": "- 1\n- 2\n"},
     r"config file '.*list\.yaml' must be a mapping of settings\. Received: list"),
    ("config-unknown-key", ["--config", "{tmp}/c.yaml"], {}, {"c.yaml": "max_step: 5\n"},
     r"config file '.*c\.yaml' keys must be settings of estimator_dist\.train \(did you mean "
     r"'max_steps'\?\)\. Received: unknown key 'max_step'"),
    ("config-bad-value", ["--config", "{tmp}/v.yaml"], {}, {"v.yaml": "max_steps: many\n"},
     r"max_steps must be a positive int\. Received: max_steps='many'"),
    ("data-missing", ["--train-data", "{tmp}/nope.csv"], {}, {},
     r"train_data must be CSV or TFRecord files in the layout of docs/input\.md: file_pattern "
     r"matched no file\. Received: '.*nope\.csv'"),
    ("data-unknown-format", ["--train-data", "{tmp}/train.txt"], {}, {"train.txt": "1,2\n"},
     r"train_data must be CSV or TFRecord files .*file_format must be given"),
    ("data-no-label", ["--train-data", "{tmp}/t.csv"], {}, {"t.csv": "a,b\n1,2\n"},
     r"train_data must be CSV or TFRecord files .*label"),
    ("eval-data-without-train-data", ["--eval-data", "{tmp}/e.csv"], {}, {},
     r"eval_data needs train_data \(the built-in data has its own eval set\)"),
    ("model-dir-other-model", ["--model", "lstm", "--model-dir", "{recorded}"], {}, {},
     r"model must match the run recorded in .*run\.json \('dense'\) to resume it; use a new "
     r"--model-dir for another model\. Received: model='lstm'"),
    ("model-dir-other-params", ["--param", "hidden_units=[8]", "--model-dir", "{recorded}"],
     {}, {}, r"params\.hidden_units must match the run recorded in .*\(\[4\]\) to resume it; "
             r".*Received: params\.hidden_units=\[8\]"),
    ("model-dir-foreign-checkpoint", ["--model-dir", "{tmp}/foreign"], {},
     {"foreign/checkpoint": 'model_checkpoint_path: "model.ckpt-9"\n'},
     r"model_dir must be new or hold a run of estimator_dist\.train \(run\.json\); use a new "
     r"--model-dir\. Received: model_dir='.*foreign' with a checkpoint and no run\.json"),
    ("model-dir-corrupt-record", ["--model-dir", "{tmp}/corrupt"], {},
     {"corrupt/run.json": "{half a record"},
     r"model_dir must hold a readable run\.json\. Received: '.*corrupt/run\.json'"),
    ("model-dir-is-a-file", ["--model-dir", "{tmp}/file"], {}, {"file": "not a dir\n"},
     r"model_dir must be a writable directory\. Received: model_dir='.*file' \(File exists\)"),
    ("model-dir-unwritable", ["--model-dir", "{tmp}/file/model"], {}, {"file": "not a dir\n"},
     r"model_dir must be a writable directory\. Received: model_dir='.*file/model' "
     r"\(Not a directory\)"),
    ("nan-loss", ["--param", "learning_rate=1e12", "--max-steps", "30"], {}, {},
     r"loss must stay finite; training stopped at step \d+ and the checkpoints from before "
     r"it are kept .*Received: loss=nan"),
    ("batch-not-divisible", ["--strategy", "mirrored", "--num-replicas", "2",
                             "--batch-size", "5"], {}, {},
     r"batch_size must be divisible by the 2 replicas .*Received: batch_size=5"),
    ("replicas-without-strategy", ["--num-replicas", "2"], {}, {},
     r"num_replicas must be 1 or None for strategy 'default'\. Received: num_replicas=2"),
    ("no-tpu", ["--strategy", "tpu"], {"TPU_NAME": None}, {},
     r"strategy 'tpu' found no TPU \(set TPU_NAME or pass tpu=NAME\); .*--tpu-validate"),
    ("tpu-validate-without-tpu", ["--tpu-validate"], {}, {},
     r"tpu_validate applies to strategy 'tpu' only\. Received: strategy='default'"),
    ("mixed-precision-without-units", ["--mixed-precision", "float16"], {}, {},
     r"mixed_precision 'float16' needs a GPU \(on CPUs and TPUs use 'bfloat16'\)\. "
     r"Received: mixed_precision='float16' with no GPU visible"),
    ("tf-config-missing", ["--strategy", "multi_worker"], {"TF_CONFIG": None}, {},
     r"TF_CONFIG must be set for strategy 'multi_worker'"),
    ("bad-tf-config", ["--strategy", "multi_worker"], {"TF_CONFIG": "{bad"}, {},
     r"TF_CONFIG must be valid JSON\. Received: '\{bad'"),
    ("cluster-source-bad", ["--strategy", "multi_worker"],
     {"TF_CONFIG": None, "SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-9"}, {},
     r"SM_CURRENT_HOST must be one of SM_HOSTS \['algo-1', 'algo-2'\]\. Received: 'algo-9'"),
    ("cluster-duplicate-address", ["--strategy", "multi_worker"],
     {"TF_CONFIG": '{"cluster": {"worker": ["127.0.0.1:2222", "localhost:2222"]}, '
                   '"task": {"type": "worker", "index": 0}}'}, {},
     r"rendezvous: every task must have its own address; worker 0 and worker 1 both have "
     r"127\.0\.0\.1:2222"),
    ("cluster-host-unresolvable", ["--strategy", "multi_worker"],
     {"TF_CONFIG": '{"cluster": {"worker": ["127.0.0.1:2222", "no-such-host.invalid:2222"]}, '
                   '"task": {"type": "worker", "index": 0}}'}, {},
     r"rendezvous: worker 1 must have a resolvable host\. Received: no-such-host\.invalid:2222"),
]
# Inputs that would end otherwise (a traceback, a hang, or files written before the failure).
CATALOGUE += [
    ("data-not-a-regular-file", ["--train-data", "{tmp}/zero.csv"], {},
     {"zero.csv": lambda path: os.symlink("/dev/zero", path)},
     r"train_data must be CSV or TFRecord files .*file_pattern must match regular files\. "
     r"Received: '.*zero\.csv' \(a character device\)"),
    ("data-named-pipe", ["--train-data", "{tmp}/x.csv"], {}, {"x.csv": os.mkfifo},
     r"file_pattern must match regular files\. Received: '.*x\.csv' \(a named pipe\)"),
    ("data-tfrecord-garbage", ["--train-data", "{tmp}/garbage.tfrecord"], {},
     {"garbage.tfrecord": lambda path: pathlib.Path(path).write_bytes(
         np.random.RandomState(0).bytes(5000))},
     r"train_data must be CSV or TFRecord files .*records must be whole \(the file is corrupt "
     r"or truncated\)\. Received: a bad record after byte 0 at .*garbage\.tfrecord record 0"),
    ("data-tfrecord-integer-x", ["--train-data", "{tmp}/ints.tfrecord"], {},
     {"ints.tfrecord": lambda path: _write_examples(path, x=tf.train.Feature(
         int64_list=tf.train.Int64List(value=[1] * 16)))},
     r"records must have 'x' as a non-empty float_list feature\. Received: int64_list at "
     r".*ints\.tfrecord record 0"),
    ("data-csv-field-too-long", ["--train-data", "{tmp}/long.csv"], {},
     {"long.csv": "a,label\n" + "1" * 140_000 + ",0\n"},
     # TF 2.15's CSV reader reads no float field that long; 2.21 reads it, as inf.
     (r"train_data records must hold numbers of at most 31 characters \(TensorFlow's CSV "
      r"reader reads no longer ones\)\. Received: a field of 140,000 characters at "
      r".*long\.csv line 2") if tf.__version__.startswith("2.15.") else
     (r"train_data records must hold finite numbers \(no NaN or Inf\)\. Received: inf at "
      r".*long\.csv line 2")),
    ("flag-number-too-large", ["--rendezvous-timeout", str(2**63 - 1), "--strategy",
                               "multi_worker"],
     {"TF_CONFIG": '{"cluster": {"worker": ["127.0.0.1:2222"]}, '
                   '"task": {"type": "worker", "index": 0}}'}, {},
     r"rendezvous_timeout must be at most 86,400\. Received: "
     r"rendezvous_timeout=9223372036854775807"),
    ("tf-config-missing-parameter-server", ["--strategy", "parameter_server"],
     {"TF_CONFIG": None}, {}, r"TF_CONFIG must be set for strategy 'parameter_server'"),
    ("model-dir-in-use", ["--model-dir", "{tmp}/held"], {},
     {"held/.estimator-dist.lock": json.dumps({
         "host": socket.gethostname(), "pid": os.getpid(), "token": "live",
         "started": "2024-01-01T00:00:00+00:00"})},
     r"model_dir must not be in use by another run \(one run per model dir\); wait for it to "
     r"end or use another --model-dir .*Received: model_dir='.*held' held by pid \d+ on host "
     r"'.+', running since 2024-01-01T00:00:00\+00:00"),
    ("tf-config-ipv6-unbracketed", ["--strategy", "multi_worker"],
     {"TF_CONFIG": '{"cluster": {"worker": ["::1:2222"]}, "task": {"type": "worker", '
                   '"index": 0}}'}, {},
     r"TF_CONFIG cluster addresses must be 'host:port' with an IPv6 host in brackets "
     r"\('\[::1\]:2222'\)\. Received: worker '::1:2222'"),
    ("tf-config-evaluator-only", ["--strategy", "multi_worker"],
     {"TF_CONFIG": '{"cluster": {"evaluator": ["127.0.0.1:2222"]}, "task": {"type": '
                   '"evaluator", "index": 0}}'}, {},
     r"TF_CONFIG cluster must have a chief, master or worker task \(an evaluator or parameter "
     r"servers alone train nothing\)\. Received: cluster task types \['evaluator'\]"),
    ("tf-config-two-chiefs", ["--strategy", "multi_worker"],
     {"TF_CONFIG": '{"cluster": {"chief": ["127.0.0.1:2222", "127.0.0.1:2223"]}, "task": '
                   '{"type": "chief", "index": 0}}'}, {},
     r"TF_CONFIG cluster must have one 'chief' task at most \(it alone writes the "
     r"checkpoints\)\. Received: chief=\['127\.0\.0\.1:2222', '127\.0\.0\.1:2223'\]"),
    ("tf-config-ps-under-multi-worker", ["--strategy", "multi_worker"],
     {"TF_CONFIG": '{"cluster": {"chief": ["127.0.0.1:2222"], "ps": ["127.0.0.1:2223"]}, '
                   '"task": {"type": "chief", "index": 0}}'}, {},
     r"TF_CONFIG must have no 'ps' tasks under strategy 'multi_worker' \(.*\)\. Received: "
     r"ps=\['127\.0\.0\.1:2223'\]"),
    ("model-too-large", ["--param", "num_classes=1000000000"], {}, {},
     r"params must give a model whose training fits in memory \(16 bytes a parameter: float32 "
     r"weights, gradients and two optimizer slots; [\d,.]+ GiB on this machine\)\. Received: "
     r"hidden_units=\[64, 64\], num_classes=1000000000 \(65,000,005,248 parameters, 968\.6 GiB\)"),
    ("model-too-large-units", ["--param", "hidden_units=[100000000,100000]"], {}, {},
     r"params must give a model whose training fits in memory .*Received: hidden_units="
     r"\[100000000, 100000\], num_classes=3 \(10,001,700,400,003 parameters"),
    ("model-too-large-lstm", ["--model", "lstm", "--param", "num_units=1000000"], {}, {},
     r"params must give a model whose training fits in memory .*Received: num_units=1000000, "
     r"num_classes=3 \(4,000,011,000,003 parameters"),
    ("model-too-many-layers", ["--config", "{tmp}/layers.yaml"], {},
     {"layers.yaml": "params:\n  hidden_units: [" + ", ".join(["4"] * 100_000) + "]\n"},
     r"params\.hidden_units must give at most 1,000 layers \(a graph of more takes many minutes "
     r"to build\)\. Received: 100,000 layers"),
    ("config-nested-too-deep", ["--config", "{tmp}/deep.json"], {},
     {"deep.json": '{"params": ' + "[" * 20_000 + "]" * 20_000 + "}"},
     r"config file must nest at most 100 levels\. Received: '.*deep\.json' \(20,001 levels of "
     r"brackets\)"),
    ("config-nested-too-deep-yaml", ["--config", "{tmp}/deep.yaml"], {},
     {"deep.yaml": "- " * 20_000 + "1\n"},
     r"config file must nest at most 100 levels\. Received: '.*deep\.yaml' \(more levels than "
     r"the reader can follow\)"),
    ("data-duplicate-label", ["--train-data", "{tmp}/d.csv"], {},
     {"d.csv": "a,label,label\n1,0,0\n"},
     r"train_data records must follow a header with one 'label' column\. Received: \['a', "
     r"'label', 'label'\] at .*d\.csv line 1"),
    ("data-label-only", ["--train-data", "{tmp}/d.csv"], {}, {"d.csv": "label\n0\n1\n"},
     r"train_data records must have a column of x besides 'label'\. Received: \['label'\] at "
     r".*d\.csv line 1"),
    ("data-quoted-number", ["--train-data", "{tmp}/d.csv"], {},
     {"d.csv": 'a,b,label\n1,2,0\n"1.5",2,0\n'},
     r"train_data records must hold unquoted numbers \(the input pipeline reads no quoted "
     r"number\)\. Received: '\"1\.5\"' at .*d\.csv line 3"),
    ("data-float32-overflow", ["--train-data", "{tmp}/d.csv"], {},
     {"d.csv": "a,b,label\n1,2,0\n1e39,2,0\n"},
     r"train_data records must hold numbers within float32's range \(at most 3\.402823e\+38 in "
     r"magnitude; larger ones become Inf\)\. Received: 1e39 at .*d\.csv line 3"),
    ("data-not-utf8-header", ["--train-data", "{tmp}/d.csv"], {},
     {"d.csv": lambda path: pathlib.Path(path).write_bytes(b"a\xe9,b,label\n1,2,0\n")},
     r"train_data must be CSV or TFRecord files in the layout of docs/input\.md: CSV header of "
     r".*d\.csv must be UTF-8 text\. Received: byte 0xe9"),
    ("engine-with-model-dir", ["--engine", "keras"], {}, {},
     r"model_dir must be left out with engine 'keras' \(the TF2 engines write no model dir or "
     r"export\)\. Received: model_dir='.*fresh'"),
    ("model-dir-symlink-loop", ["--model-dir", "{tmp}/loop/m"], {},
     {"loop": lambda path: os.symlink(path, path)},
     r"model_dir must be a writable directory\. Received: model_dir='.*loop/m' \('.*loop' is a "
     r"symlink loop: Too many levels of symbolic links\)"),
    ("mends-off-unknown", [], {"ESTIMATOR_DIST_MENDS_OFF": "early_stoping"}, {},
     r"ESTIMATOR_DIST_MENDS_OFF must list mends among all, estimator_api_name, .*\. Received: "
     r"ESTIMATOR_DIST_MENDS_OFF='early_stoping'$"),
]
_IDS = [entry[0] for entry in CATALOGUE]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A model dir holding a recorded dense run (hidden_units [4], 3 steps)."""
    model_dir = str(tmp_path_factory.mktemp("catalogue") / "recorded")
    training.run(RunSettings(max_steps=3, params={"hidden_units": [4]}, export=False,
                             model_dir=model_dir), stream=open(os.devnull, "w"))
    return model_dir


def _prepare(argv, files, tmp_path, recorded_dir):
    """``files`` maps a name to its text, or to a function that makes it from its path."""
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(str(tmp_path / name))
        else:
            (tmp_path / name).write_text(content)
    fresh = str(tmp_path / "fresh")
    if "--model-dir" not in argv:
        argv = argv + ["--model-dir", "{fresh}"]
    return [a.format(tmp=tmp_path, fresh=fresh, recorded=recorded_dir) for a in argv], fresh


def _set_env(monkeypatch, env):
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


@pytest.mark.parametrize("entry", CATALOGUE, ids=_IDS)
@pytest.mark.slow
def test_mistake_gives_one_line_exit_2_and_leaves_model_dir(entry, recorded, tmp_path, capsys,
                                                            monkeypatch):
    _, argv, env, files, message = entry
    argv, fresh = _prepare(argv, files, tmp_path, recorded)
    _set_env(monkeypatch, env)
    before = snapshot(recorded)
    code, _, err = run_main(argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(_PREFIX), err
    assert re.search(message, err), err
    assert snapshot(recorded) == before
    if "nan" not in entry[0]:
        assert not os.path.exists(fresh)


@pytest.mark.slow
def test_nan_loss_keeps_last_finite_checkpoint(model_dir, capsys):
    run_main(["--param", "learning_rate=1e12", "--max-steps", 1, "--no-export",
              "--model-dir", model_dir], capsys)
    code, _, err = run_main(["--max-steps", 30, "--save-checkpoints-steps", 1,
                             "--model-dir", model_dir], capsys)
    assert code == 2 and "loss must stay finite" in err
    latest = tf.train.latest_checkpoint(model_dir)
    reader = tf.train.load_checkpoint(latest)
    assert all(np.all(np.isfinite(reader.get_tensor(name)))
               for name in reader.get_variable_to_shape_map())


def test_docs_list_every_entry():
    with open(os.path.join(REPO_ROOT, "docs", "errors.md"), encoding="utf-8") as file:
        documented = re.findall(r"^### `([a-z0-9-]+)`", file.read(), flags=re.MULTILINE)
    assert documented == _IDS


@pytest.mark.slow
@pytest.mark.parametrize("entry_id", ["unknown-flag", "config-unknown-key", "no-tpu",
                                      "nan-loss", "mends-off-unknown"])
def test_cli_process_prints_one_line_and_exits_2(entry_id, python_run, recorded, tmp_path):
    _, argv, env, files, message = CATALOGUE[_IDS.index(entry_id)]
    argv, _ = _prepare(argv, files, tmp_path, recorded)
    env = {k: v for k, v in env.items() if v is not None}
    done = python_run(["-m", "estimator_dist.train", *argv], timeout=120, env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and re.search(message, done.stderr), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("entry_id", ["cluster-duplicate-address", "tf-config-missing"])
def test_cli_process_quiets_tensorflow_info_lines(entry_id, recorded, tmp_path):
    """TensorFlow's C++ INFO lines (oneDNN, cpu_feature_guard) come at its import, before
    the flags are parsed; the refusal is still the only line, with TF_CONFIG set or not."""
    _, argv, env, files, message = CATALOGUE[_IDS.index(entry_id)]
    argv, _ = _prepare(argv, files, tmp_path, recorded)
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("TF_CPP_MIN_LOG_LEVEL", "TF_CONFIG")}
    full_env.update({k: v for k, v in env.items() if v is not None})
    done = subprocess.run([sys.executable, "-m", "estimator_dist.train", *argv],
                          capture_output=True, text=True, timeout=120, env=full_env,
                          cwd=REPO_ROOT)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and re.search(message, done.stderr), done.stderr


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cli_process_sigterm_is_one_line_exit_143(tmp_path):
    """SIGTERM while the run prepares (here: the data check of a large CSV file) or, on a
    fast machine, once it trains: one line and exit 143 either way."""
    path = tmp_path / "big.csv"
    path.write_text("a,b,label\n" + "1.0,2.0,1\n" * 400_000)
    process = subprocess.Popen(
        [sys.executable, "-m", "estimator_dist.train", "--train-data", str(path),
         "--model-dir", str(tmp_path / "m"), "--max-steps", "100000"],
        stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + 60
        while not handles_signal(process.pid, signal.SIGTERM):  # The CLI is up,
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(8)  # and into its data check (or training, on a fast machine).
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143, err
    assert err.count("\n") == 1, err
    assert re.search(r"interrupted by SIGTERM|SIGTERM: stopped training at step \d+", err), err
