"""Every benchmark script runs end to end at tiny sizes (no timings are asserted), and
leaves nothing in the temporary directory."""
import functools
import json
import os
import re

import pytest

from estimator_dist import precision
from tests.support import run_python

pytestmark = pytest.mark.slow


@pytest.fixture
def python_run(tmp_path):
    """``run_python`` with the benchmark's temporary directory (``TMPDIR``) one of the
    test's, empty again once the benchmark has ended."""
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    yield functools.partial(run_python, env={"TMPDIR": str(scratch)})
    # TensorFlow's autograph removes its generated files as its process exits, so the
    # tasks a benchmark ends with a signal leave theirs.
    left = [name for name in os.listdir(scratch)
            if not name.startswith("__autograph_generated_file")]
    assert not left, f"left in the temporary directory: {left}"


def _run(python_run, script, *args):
    result = python_run([f"benchmarks/{script}", *args], timeout=280)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _ratios(stdout):
    return dict(re.findall(r"^  (.+?)\s+[\d,]+ examples/s\s+x([\d.]+) of ", stdout, re.M))


def test_steps_per_run_benchmark_reports_each_k(python_run):
    out = _run(python_run, "steps_per_run.py", "--rounds", "1", "--steps", "6",
               "--hidden-units", "8", "--steps-per-run", "1", "2")
    assert set(_ratios(out)) == {"steps_per_run=1", "steps_per_run=2"}
    assert "sgemm 2048^3 float32: median" in out


def test_steps_per_run_benchmark_runs_under_v1_behavior(python_run):
    out = _run(python_run, "steps_per_run.py", "--rounds", "1", "--steps", "6",
               "--hidden-units", "8", "--steps-per-run", "1", "2", "--v1-behavior")
    assert "v1 behaviour" in out
    assert len(_ratios(out)) == 2


@pytest.mark.parametrize("model,peer", [("dense", "canned DNNClassifier"),
                                        ("lstm", "Keras LSTM fit")])
def test_models_benchmark_reports_peer_plain_and_package(python_run, model, peer):
    out = _run(python_run, "models.py", model, "--rounds", "1", "--steps", "4",
               "--steps-per-run", "2", "--tiny")
    assert set(_ratios(out)) == {peer, "plain TF1 model_fn", f"{model} model_fn",
                                 f"{model} model_fn, K=2"}


def test_models_benchmark_adds_the_xla_compiled_model_fn(python_run):
    out = _run(python_run, "models.py", "dense", "--rounds", "1", "--steps", "4",
               "--steps-per-run", "2", "--tiny", "--xla")
    assert "dense model_fn, XLA" in _ratios(out)


def test_cli_memory_benchmark_reports_both_cases(python_run):
    out = _run(python_run, "cli_memory.py", "--rounds", "1", "--max-steps", "4")
    assert len(re.findall(r"peak RSS median [\d,]+ MiB", out)) == 2


def test_lstm_candidates_benchmark_checks_and_times_each(python_run):
    out = _run(python_run, "lstm_candidates.py", "--rounds", "1", "--steps", "3", "--tiny")
    differences = re.findall(r"max abs difference from dynamic_rnn ([\d.e+-]+)", out)
    assert len(differences) == 3 and max(map(float, differences)) < 1e-5
    assert len(_ratios(out)) == 3


def test_lstm_candidates_benchmark_times_the_forward_pass(python_run):
    out = _run(python_run, "lstm_candidates.py", "--rounds", "1", "--steps", "3", "--tiny",
               "--forward", "--cpu-time")
    assert set(_ratios(out)) == {"dynamic_rnn", "package", "block_cell", "package_forward"}


def test_lstm_streaming_benchmark_times_both_exports(python_run):
    out = _run(python_run, "lstm_streaming.py", "--rounds", "1", "--calls", "3")
    latencies = dict(re.findall(r"^  (.+?)\s+([\d.]+) ms per chunk", out, re.M))
    assert set(latencies) == {"Keras LSTM", "lstm_model_fn export"}


def test_soak_benchmark_prints_a_row_per_task_and_keeps_work_dir(python_run, tmp_path):
    samples = tmp_path / "soak.json"
    result = python_run(["benchmarks/soak.py", "--cases", "default", "--seconds", "25",
                         "--interval", "2", "--work-dir", str(tmp_path / "runs"),
                         "--json", str(samples)], timeout=120)
    assert result.returncode in (0, 1), result.stderr[-3000:]  # Too short to judge growth.
    assert re.search(r"^default: \d+ s, (FLAT|GROWS)$", result.stdout, re.M), result.stdout
    assert re.search(r"^  train \(\d+\) +\d+/\d+/\d+, [+-]\d+ ", result.stdout, re.M)
    assert "model dir: " in result.stdout
    assert (tmp_path / "runs" / "default.log").is_file()
    assert (tmp_path / "runs" / "default" / "run.json").is_file()

    # A run that ended early is reported with the last lines of its log, and a global
    # step that went back (a restore of an older checkpoint) is named.
    run = json.loads(samples.read_text())
    run["default"].update(ended=1, log_tail=["Traceback (most recent call last):",
                                             "ValueError: the reason"])
    last = run["default"]["dir"][-1]
    run["default"]["dir"] += [dict(last, t=98.0, step=1500), dict(last, t=99.0, step=0)]
    samples.write_text(json.dumps(run))
    judged = python_run(["benchmarks/soak.py", "--from-json", str(samples)], timeout=60)
    assert judged.returncode == 1
    assert re.search(r"FAULT: the run ended early with exit code 1; the last lines of \S+"
                     r"default\.log:\n    Traceback \(most recent call last\):\n"
                     r"    ValueError: the reason$", judged.stdout, re.M), judged.stdout
    assert re.search(r"FAULT: the global step went back from 1,500 to 0 at 99 s \(training "
                     r"restored an older checkpoint\)$", judged.stdout, re.M), judged.stdout


def test_soak_peer_case_trains_a_plain_estimator(python_run, tmp_path):
    result = python_run(["benchmarks/soak.py", "--cases", "plain-tf default", "--seconds",
                         "12", "--interval", "2", "--work-dir", str(tmp_path)], timeout=120)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    assert re.search(r"^  _plain_estimator \(\d+\) +\d+/\d+/\d+, ", result.stdout, re.M), \
        result.stdout


@pytest.mark.multi_process
@pytest.mark.timeout(300)
def test_scaling_benchmark_reports_each_case_and_a_breakdown(python_run):
    out = _run(python_run, "scaling.py", "--rounds", "1", "--steps", "8", "--warmup", "2",
               "--batch", "16", "--hidden-units", "4", "--no-collectives",
               "--kinds", "alone", "pair",
               "--package-variants", "all_reduce_dtype=bfloat16,all_reduce_bytes_per_pack=64")
    cases = re.findall(r"^  (.+?)\s+[\d.]+ ms/step\s+[\d,]+ examples/s\s+x[\d.]+ ", out, re.M)
    assert cases == ["1 process", "2 lone processes, half batch",
                     "package 2 workers (all_reduce_dtype=bfloat16,all_reduce_bytes_per_pack=64)"]
    assert re.search(r"traced step \(ms\): compute [\d.]+, all-reduce [\d.]+, "
                     r"waiting [\d.]+, host [\d.]+", out)


@pytest.mark.multi_process
def test_sigterm_roles_benchmark_times_every_task(python_run):
    out = _run(python_run, "sigterm_roles.py", "--rounds", "1", "--settle", "1")
    assert re.search(r"^median \S+: chief 0 [\d.]+ s, worker 0 [\d.]+ s, ps 0 [\d.]+ s, "
                     r"evaluator 0 [\d.]+ s$", out, re.M), out


@pytest.mark.multi_process
def test_preemption_vote_benchmark_reports_the_ratio(python_run):
    out = _run(python_run, "preemption_vote.py", "--rounds", "1", "--steps", "12")
    assert re.search(r"^median: with hook [\d.]+ steps/s, without [\d.]+ steps/s, ratio [\d.]+$",
                     out, re.M)


def test_strategies_benchmark_reports_each_strategy(python_run):
    out = _run(python_run, "strategies.py", "--rounds", "1", "--steps", "6", "--models",
               "dense")
    assert len(re.findall(r"^  \S+ +[\d,]+   x[\d.]+ of default$", out, re.M)) == 4


def test_divergence_check_benchmark_reports_each_case(python_run):
    out = _run(python_run, "divergence_check.py", "--rounds", "1", "--steps", "60")  # 50 warm up.
    assert len(re.findall(r"^  \S+ +[\d.]+ ms   x[\d.]+ of without$", out, re.M)) == 3
    assert "one check: median" in out


def test_exact_eval_benchmark_reports_the_ratio(python_run):
    out = _run(python_run, "exact_eval.py", "--rounds", "1", "--examples", "512",
               "--batch-size", "64")
    assert re.search(r"one device / replicas: x[\d.]+", out)


def test_input_pipeline_benchmark_reports_each_input(python_run):
    out = _run(python_run, "input_pipeline.py", "--rounds", "1", "--batches", "3")
    assert re.search(r"^lstm_model_fn +[\d,]+ +1\.0$", out, re.M)


def test_precision_benchmark_reports_each_model_and_both_ceilings(python_run):
    """Each model in both precisions on a CPU with bfloat16 units; without them, where the
    package refuses mixed bfloat16, the ceilings alone."""
    out = _run(python_run, "precision.py", "--rounds", "1", "--steps", "3", "--tiny")
    models = {f"{model} {dtype}" for model in ("mlp", "dense", "lstm")
              for dtype in ("float32", "bfloat16")}
    units = precision.bf16_cpu_features()
    assert set(_ratios(out)) == (models if units else set()), out
    assert ("no bfloat16 units on this CPU" in out) == (not units)
    assert re.search(r"matmul 2048\^3 float32: median \d+", out)
    assert re.search(r"matmul 2048\^3 bfloat16: median \d+", out)
    assert units or re.search(r"bfloat16 / float32: median x\d+\.\d\d", out)


def test_gpu_check_without_gpu_says_so_and_exits_0(python_run):
    out = _run(python_run, "gpu_check.py")
    assert "no GPU visible: nothing to check" in out


def test_gpu_check_on_cpu_devices_passes_every_row(python_run):
    out = _run(python_run, "gpu_check.py", "--cpu")
    rows = re.findall(r"^(mirrored|LSTM kernel vs dynamic_rnn|mixed \w+(?: \(CPU\))?|cuDNN LSTM "
                      r"path)\s+(ok|FAIL)\s", out, re.M)
    assert len(rows) == 5 and all(result == "ok" for _, result in rows), out[-2000:]
    refused = re.search(r"^mixed bfloat16 \(CPU\)\s+ok\s+refused: ", out, re.M)
    assert bool(refused) == (not precision.bf16_cpu_features()), out[-2000:]


def test_versions_benchmark_runs_both_ends(python_run, other_end_python):
    import sys

    from estimator_dist import mends

    pythons = [sys.executable, other_end_python]
    if mends.tensorflow_release() != "2.15":
        pythons.reverse()
    out = _run(python_run, "versions.py", "--pythons", *pythons, "--rounds", "1",
               "--scale", "0.01", "--cases", "dense", "dense 2 workers")
    rows = dict(re.findall(r"^(sgemm|dense 2 workers|dense)\s+.*x([\d.]+) \(", out, re.M))
    assert set(rows) == {"sgemm", "dense", "dense 2 workers"}, out
    assert all(float(ratio) > 0 for ratio in rows.values())


def test_cpu_mirrored_benchmark_compares_package_with_plain(python_run):
    out = _run(python_run, "cpu_mirrored.py", "--tiny", "--rounds", "1", "--behaviours",
               "tf1", "--models", "dense", "--systems", "package", "plain")
    assert re.search(r"dense  package .* examples/s   x[\d.]+ of plain", out)
    assert re.search(r"dense  plain .* examples/s   x1\.00 of plain", out)


@pytest.mark.multi_process
def test_wide_benchmark_sends_fewer_bytes_as_rows_than_dense(python_run):
    """The parameter_server case is left out to keep it short (five processes, not eight)."""
    out = _run(python_run, "wide.py", "--rounds", "1", "--steps", "8", "--warmup", "2",
               "--batch", "16", "--buckets", "300000", "--vocab", "100", "--dim", "2",
               "--cases", "dense", "rows")
    ratios = dict(re.findall(r"^  (.+?)\s+[\d.]+ ms/step\s+[\d,]+ examples/s\s+x([\d.]+) ",
                             out, re.M))
    assert set(ratios) == {"1 process", "2 workers, dense", "2 workers, rows"}, out
    sent = {name: int(count.replace(",", "")) for name, count in
            re.findall(r"^  (.+?)\s+[\d.]+ ms/step.*?([\d,]+) bytes/step$", out, re.M)}
    # The 1.2 MB crossed column's dense gradient crosses every step; as rows, 8 of them.
    assert sent["2 workers, rows"] * 4 < sent["2 workers, dense"], out


@pytest.mark.multi_process
def test_wide_benchmark_runs_the_census_style_trainer(python_run):
    """``--model census``: the census-style trainer's two optimizers, on one process and
    two workers, each worker at half the global batch."""
    out = _run(python_run, "wide.py", "--model", "census", "--rounds", "1", "--steps", "8",
               "--warmup", "2", "--batch", "16", "--cases", "rows")
    assert "census-style: FTRL over crossed columns" in out, out
    ratios = dict(re.findall(r"^  (.+?)\s+[\d.]+ ms/step\s+[\d,]+ examples/s\s+x([\d.]+) ",
                             out, re.M))
    assert set(ratios) == {"1 process", "2 workers, rows"}, out
