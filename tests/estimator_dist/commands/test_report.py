"""``python -m estimator_dist.report``: event files -> curves PNG and a text table."""
import io

import pytest
from matplotlib import image

from estimator_dist.commands import report
from estimator_dist.job import events, training
from estimator_dist.job.settings import RunSettings


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    """A dense run of 20 steps with a checkpoint (and an evaluation) every 10."""
    model_dir = str(tmp_path_factory.mktemp("report") / "model")
    settings = RunSettings(max_steps=20, save_checkpoints_steps=10, export=False,
                           model_dir=model_dir)
    training.run(settings, stream=io.StringIO())
    return model_dir


@pytest.mark.slow
def test_read_curves_has_train_loss_and_eval_metrics(trained_dir):
    train, evaluation = report.read_curves(trained_dir)
    # The first loss is the first loop's last step: 20 max_steps -> 2 steps per run.
    assert list(train) == ["loss"] and train["loss"][0][0] == 2
    assert sorted(evaluation) == ["accuracy", "loss"]
    assert [step for step, _ in evaluation["accuracy"]] == [10, 20]


def test_last_values_are_the_final_eval(trained_dir):
    last = events.last_values(f"{trained_dir}/eval")
    assert last["global_step"] == 20 and 0.0 <= last["accuracy"] <= 1.0


@pytest.mark.slow
def test_report_writes_png_and_prints_table(trained_dir, tmp_path, capsys):
    output = tmp_path / "curves.png"
    assert report.main(["--model-dir", trained_dir, "--output", str(output)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["step", "train", "loss", "eval", "accuracy", "eval", "loss"]
    assert [line.split()[0] for line in lines[1:3]] == ["10", "20"]
    assert lines[-1] == f"curves     {output}"
    height, width, _ = image.imread(str(output)).shape
    assert width > height > 100


def test_report_output_defaults_to_model_dir(trained_dir, capsys):
    assert report.main(["--model-dir", trained_dir]) == 0
    assert capsys.readouterr().out.endswith(f"curves     {trained_dir}/curves.png\n")


def test_table_without_eval_shows_last_train_step():
    rows = report.table({"loss": [(1, 2.0), (50, 0.5)]}, {})
    assert rows == ["step  train loss", "  50      0.5000"]


def test_report_missing_model_dir_exits_2(tmp_path, capsys):
    assert report.main(["--model-dir", str(tmp_path / "nope")]) == 2
    assert "model_dir must be an existing directory" in capsys.readouterr().err


def test_report_dir_without_events_exits_2(tmp_path, capsys):
    assert report.main(["--model-dir", str(tmp_path)]) == 2
    assert "model_dir must hold the event files of a train run" in capsys.readouterr().err


def test_report_output_not_png_exits_2(trained_dir, tmp_path, capsys):
    assert report.main(["--model-dir", trained_dir, "--output", str(tmp_path / "c.jpg")]) == 2
    assert "output must be a .png path. Received: output=" in capsys.readouterr().err


@pytest.mark.slow
def test_report_command_as_pinned(python_run, trained_dir, tmp_path):
    output = tmp_path / "curves.png"
    done = python_run(["-m", "estimator_dist.report", "--model-dir", trained_dir,
                       "--output", str(output)], timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and output.read_bytes().startswith(b"\x89PNG")
