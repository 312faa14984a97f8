"""Every benchmark script runs end to end at tiny sizes (no timings are asserted)."""
import re

import pytest

pytestmark = pytest.mark.slow


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
               "--forward")
    assert len(_ratios(out)) == 3


def test_precision_benchmark_reports_each_model_and_both_ceilings(python_run):
    out = _run(python_run, "precision.py", "--rounds", "1", "--steps", "3", "--tiny")
    assert set(_ratios(out)) == {f"{model} {dtype}" for model in ("mlp", "dense", "lstm")
                                 for dtype in ("float32", "bfloat16")}
    assert re.search(r"matmul 2048\^3 float32: median \d+", out)
    assert re.search(r"matmul 2048\^3 bfloat16: median \d+", out)


def test_gpu_check_without_gpu_says_so_and_exits_0(python_run):
    out = _run(python_run, "gpu_check.py")
    assert "no GPU visible: nothing to check" in out


def test_gpu_check_on_cpu_devices_passes_every_row(python_run):
    out = _run(python_run, "gpu_check.py", "--cpu")
    rows = re.findall(r"^(mirrored|LSTM kernel vs dynamic_rnn|mixed \w+(?: \(CPU\))?|cuDNN LSTM "
                      r"path)\s+(ok|FAIL)\s", out, re.M)
    assert len(rows) == 5 and all(result == "ok" for _, result in rows), out[-2000:]
