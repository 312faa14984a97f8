"""``python -m estimator_dist.train``: flags, config file, recorded runs, progress, summary."""
import glob
import json

import pytest
import tensorflow as tf

from estimator_dist import run_record
from estimator_dist.commands import train
from estimator_dist.job import events, preparation, training
from estimator_dist.job.settings import RunSettings
from estimator_dist.models import MODELS
from tests.train_support import keep_tf_logging, run_main  # noqa: F401

pytestmark = pytest.mark.usefixtures("keep_tf_logging")


def _settings(argv):
    return train.settings_from_args(train.train_parser().parse_args(argv))


def test_help_groups_flags_and_shows_defaults():
    text = train.train_parser().format_help()
    groups = [text.index(f"\n{name}:\n") for name in ("model", "data", "distribution", "run",
                                                      "export")]
    assert groups == sorted(groups)
    text = " ".join(text.split())
    dense, lstm = MODELS["dense"], MODELS["lstm"]
    for default in ("(default: dense)", "(default: default)", "(default: 42)",
                    "(default: MODEL_DIR/export)",
                    f"dense {dense.batch_size}, lstm {lstm.batch_size}",
                    f"dense {dense.max_steps}, lstm {lstm.max_steps}"):
        assert default in text


class _Prepared(Exception):
    """Raised once a run's checks passed, before it writes anything."""


def test_resume_reads_the_recorded_run_once(tmp_path, monkeypatch, capsys):
    model_dir = str(tmp_path / "run")
    params = {**MODELS["dense"].params, "hidden_units": [8]}
    tmp_path.joinpath("run").mkdir()
    run_record.write(model_dir, run_record.make_record(
        RunSettings(model="dense", params=params, max_steps=5), {"train": "built-in"}))
    reads, load = [], run_record.load
    monkeypatch.setattr(run_record, "load", lambda path: reads.append(path) or load(path))

    def prepared(model_dir):
        raise _Prepared(model_dir)

    monkeypatch.setattr(training, "_prepare_model_dir", prepared)
    with pytest.raises(_Prepared):
        run_main(["--model-dir", model_dir], capsys)
    assert reads == [model_dir]


def test_param_flag_reads_json_values_and_strings():
    settings = _settings(["--param", "hidden_units=[8,8]", "--param", "optimizer=sgd",
                          "--param", "learning_rate=0.5"])
    assert settings.params == {"hidden_units": [8, 8], "optimizer": "sgd", "learning_rate": 0.5}


def test_param_flag_without_equals_exits_2(capsys):
    code, _, err = run_main(["--param", "learning_rate"], capsys)
    assert code == 2
    assert "argument --param: must be KEY=VALUE. Received: 'learning_rate'" in err


def test_unknown_flag_suggests_nearest(capsys):
    code, _, err = run_main(["--save-checkpoint-step", "5"], capsys)
    assert code == 2 and "(did you mean '--save-checkpoints-steps'?)" in err


def test_config_file_flags_override_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("model: lstm\nmax_steps: 7\nparams:\n  num_units: 4\n")
    settings = _settings(["--config", str(path), "--max-steps", "9", "--param", "dropout=0.1"])
    assert (settings.model, settings.max_steps) == ("lstm", 9)
    assert settings.params == {"num_units": 4, "dropout": 0.1}


def test_print_config_shows_merged_settings_without_training(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"batch_size": 32, "strategy": "mirrored"}))
    code, out, _ = run_main(["--config", path, "--seed", "3", "--print-config"], capsys)
    shown = json.loads(out)
    assert code == 0
    assert (shown["batch_size"], shown["strategy"], shown["seed"]) == (32, "mirrored", 3)


def test_print_config_takes_the_recorded_run(tmp_path, capsys):
    settings = RunSettings(model="lstm", params={"num_units": 4}, max_steps=30,
                           strategy="mirrored")
    run_record.write(str(tmp_path), run_record.make_record(settings, {}))
    code, out, _ = run_main(["--model-dir", tmp_path, "--print-config"], capsys)
    shown = json.loads(out)
    assert code == 0
    assert (shown["model"], shown["params"], shown["max_steps"]) == ("lstm", {"num_units": 4}, 30)
    assert shown["strategy"] == "default"  # Where a run executes is not carried over.


@pytest.mark.slow
def test_train_reads_well_from_start_to_finish(model_dir, capsys):
    code, out, err = run_main(["--max-steps", 20, "--model-dir", model_dir], capsys)
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert lines[0] == (f"Training dense to step 20: global batch 128 over 1 replica "
                        f"(strategy default), float32, model dir {model_dir}")
    assert lines[1].startswith("step 2/20  loss ") and "examples/s" in lines[1]
    assert any(line.startswith("step 20/20  loss ") for line in lines)
    summary = {line[:10].strip(): line[11:] for line in lines[-5:]}
    assert summary["metrics"].startswith("accuracy ") and summary["metrics"].endswith("(step 20)")
    assert summary["training"].startswith("20 steps in ") and "examples/s" in summary["training"]
    assert summary["export"].startswith(f"{model_dir}/export/")
    assert summary["model dir"] == model_dir
    assert run_record.load(model_dir)["settings"]["max_steps"] == 20


@pytest.mark.slow
def test_resume_takes_recorded_run_and_counts_new_steps(model_dir, capsys):
    run_main(["--param", "hidden_units=[8]", "--batch-size", 32, "--max-steps", 6,
              "--model-dir", model_dir, "--no-export"], capsys)
    code, out, _ = run_main(["--model-dir", model_dir, "--max-steps", 10], capsys)
    assert code == 0
    assert out.startswith("Resuming dense at step 6 to step 10: global batch 32")
    assert "training   4 steps in " in out
    assert "export     " not in out  # --no-export is recorded with the run.
    assert run_record.load(model_dir)["settings"]["params"]["hidden_units"] == [8]


@pytest.mark.slow
def test_resume_at_max_steps_trains_nothing(model_dir, capsys):
    run_main(["--max-steps", 5, "--model-dir", model_dir, "--no-export"], capsys)
    code, out, _ = run_main(["--model-dir", model_dir], capsys)
    assert code == 0
    assert out.startswith(f"dense in {model_dir} is already at step 5 of 5: nothing to train\n")
    assert "training   none: the model dir is already at max_steps 5" in out
    assert "metrics    accuracy " in out


@pytest.mark.slow
def test_save_checkpoints_steps_evaluates_each_checkpoint(model_dir, capsys):
    code, _, _ = run_main(["--max-steps", 20, "--save-checkpoints-steps", 10, "--no-export",
                           "--model-dir", model_dir], capsys)
    eval_steps = [step for step, _ in events.scalars(f"{model_dir}/eval")["accuracy"]]
    assert code == 0 and eval_steps == [10, 20]


def _graph_events(model_dir):
    """How many times the training events files hold the graph and the meta graph."""
    found = [event for path in glob.glob(f"{model_dir}/events.out.tfevents.*")
             for event in tf.compat.v1.train.summary_iterator(path)]
    return (sum(bool(event.graph_def) for event in found),
            sum(bool(event.meta_graph_def) for event in found))


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
@pytest.mark.slow
def test_graph_goes_into_the_events_file_once_over_train_calls(model_dir, capsys, strategy):
    """One train call per checkpoint interval; Estimator's own saver would write the
    graph at each."""
    code, _, _ = run_main(["--max-steps", 30, "--save-checkpoints-steps", 10, "--no-export",
                           "--strategy", strategy, "--model-dir", model_dir], capsys)
    eval_steps = [step for step, _ in events.scalars(f"{model_dir}/eval")["accuracy"]]
    assert code == 0 and eval_steps == [10, 20, 30]
    assert tf.train.latest_checkpoint(model_dir).endswith("model.ckpt-30")
    assert _graph_events(model_dir) == (1, 1)


@pytest.mark.slow
def test_mirrored_progress_shows_cross_replica_loss(model_dir, capsys):
    code, out, _ = run_main(["--strategy", "mirrored", "--num-replicas", 2, "--max-steps", 10,
                             "--batch-size", 64, "--no-export", "--model-dir", model_dir], capsys)
    assert code == 0
    assert "global batch 64 over 2 replicas (strategy mirrored)" in out
    assert "step 10/10  loss 0." in out or "step 10/10  loss 1." in out


@pytest.mark.slow
def test_examples_per_second_written_for_tensorboard(model_dir, capsys):
    run_main(["--max-steps", 20, "--no-export", "--model-dir", model_dir], capsys)
    scalars = events.scalars(model_dir)
    assert scalars["examples/sec"] and scalars["learning_rate"][-1][1] == pytest.approx(0.01)


@pytest.mark.slow
def test_cli_is_quiet_by_default_in_a_fresh_mirrored_process(python_run, model_dir):
    done = python_run(["-m", "estimator_dist.train", "--max-steps", "6", "--no-export",
                       "--strategy", "mirrored", "--model-dir", model_dir], timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "over 2 replicas (strategy mirrored)" in done.stdout
    assert "training   6 steps in " in done.stdout


@pytest.mark.slow
def test_cli_verbose_restores_tensorflow_logs(python_run, model_dir):
    done = python_run(["-m", "estimator_dist.train", "--max-steps", "5", "--no-export",
                       "--verbose", "--model-dir", model_dir], timeout=120)
    assert done.returncode == 0, done.stderr
    assert "INFO:tensorflow:" in done.stderr


def test_summary_of_evaluator_task_has_no_training_line(capsys):
    result = training.Result(model_dir="runs/a", metrics={"accuracy": 0.5, "global_step": 40},
                             export_path=None, seconds=3.0, throughput=None, max_steps=40,
                             task_type="evaluator")
    train._print_summary(result)
    assert capsys.readouterr().out.splitlines() == [
        "metrics    accuracy 0.5000  (step 40)", "model dir  runs/a", "wall time  3.0 s"]


def test_sparse_gradients_flag_with_an_unknown_value_exits_2_in_one_line(capsys):
    code, out, err = run_main(["--strategy", "multi_worker", "--sparse-gradients", "sparse"],
                              capsys)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "python -m estimator_dist.train: error: argument --sparse-gradients: invalid choice: "
        "'sparse' (choose from 'auto', 'rows', 'dense')"]


def test_sparse_gradients_flag_reaches_make_run_config(monkeypatch):
    reached = {}

    def resolve(strategy, task, **kwargs):
        reached.update(kwargs, strategy=strategy)
        raise _Prepared()

    monkeypatch.setattr(preparation.plan_lib, "resolve", resolve)
    settings = _settings(["--strategy", "multi_worker", "--sparse-gradients", "rows",
                          "--max-steps", "10"])
    with pytest.raises(_Prepared):
        preparation._strategy_plan(settings, settings.kind, None)
    assert (reached["strategy"].name, reached["sparse_gradients"]) == ("multi_worker", "rows")


def test_sparse_gradients_flag_without_multi_worker_refused(capsys):
    code, _, err = run_main(["--sparse-gradients", "rows"], capsys)
    assert code == 2
    assert ("sparse_gradients applies to strategy='multi_worker' only. Received: "
            "sparse_gradients='rows' with strategy='default'") in err
