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


@pytest.mark.multi_process
def test_preemption_vote_benchmark_reports_the_ratio(python_run):
    out = _run(python_run, "preemption_vote.py", "--rounds", "1", "--steps", "12")
    assert re.search(r"^median: with hook [\d.]+ steps/s, without [\d.]+ steps/s, ratio [\d.]+$",
                     out, re.M)


@pytest.mark.multi_process
def test_cluster_scaling_benchmark_reports_each_case(python_run):
    out = _run(python_run, "cluster_scaling.py", "--rounds", "1", "--steps", "6", "--cases",
               "default", "multi_worker-1")
    assert "default" in out and "multi_worker-1" in out


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
