"""run.json: what a train run records, what a resume takes from it, what it refuses."""
import dataclasses
import json
import os

import pytest

from estimator_dist import run_record
from estimator_dist.errors import UsageError
from estimator_dist.job.settings import RunSettings

_SETTINGS = RunSettings(model="dense", params={"hidden_units": [8], "learning_rate": 0.01},
                        batch_size=32, max_steps=100, strategy="mirrored", num_replicas=2,
                        seed=1, model_dir="/somewhere", verbose=True)


@pytest.fixture
def recorded_dir(tmp_path):
    run_record.write(str(tmp_path), run_record.make_record(_SETTINGS, {"train": "built-in"}))
    return str(tmp_path)


def _check_resume(model_dir, settings):
    run_record.check_resume(model_dir, settings, run_record.load(model_dir))


def test_make_record_keeps_settings_data_and_versions():
    record = run_record.make_record(_SETTINGS, {"train": "built-in"})
    assert record["settings"]["params"] == _SETTINGS.params
    assert "model_dir" not in record["settings"] and "verbose" not in record["settings"]
    assert record["settings"]["strategy"] == "mirrored"
    assert record["data"] == {"train": "built-in"}
    assert {"python", "tensorflow-estimator", "numpy"} <= set(record["versions"])


def test_write_leaves_only_the_record(recorded_dir):
    assert os.listdir(recorded_dir) == [run_record.FILENAME]
    with open(run_record.path(recorded_dir), encoding="utf-8") as file:
        assert json.load(file)["settings"]["model"] == "dense"


def test_carried_settings_carry_what_not_where(recorded_dir):
    carried = run_record.carried_settings(run_record.load(recorded_dir), RunSettings)
    assert carried["model"] == "dense" and carried["max_steps"] == 100
    assert "strategy" not in carried and "num_replicas" not in carried


def test_resume_exports_where_a_fresh_run_would_not_where_run_json_says(tmp_path):
    from estimator_dist.commands import train  # Late: the CLI's own merge of the layers.

    settings = _SETTINGS.replace(export_dir=str(tmp_path.parent / "elsewhere"))
    run_record.write(str(tmp_path), run_record.make_record(settings, {"train": "built-in"}))
    assert run_record.recorded_settings(str(tmp_path))["export_dir"] == settings.export_dir
    assert "export_dir" not in run_record.carried_settings(run_record.load(str(tmp_path)),
                                                           RunSettings)
    resumed = train.settings_from_args(train.train_parser().parse_args(
        ["--model-dir", str(tmp_path)]))
    assert resumed.export_dir is None and resumed.export  # MODEL_DIR/export, as a fresh run.
    again = train.settings_from_args(train.train_parser().parse_args(
        ["--model-dir", str(tmp_path), "--export-dir", str(tmp_path / "out")]))
    assert again.export_dir == str(tmp_path / "out")


def test_carried_settings_without_record_are_empty():
    assert run_record.carried_settings(None, RunSettings) == {}


def test_recorded_settings_of_new_dir_are_empty(tmp_path):
    assert run_record.recorded_settings(str(tmp_path / "new")) == {}


def test_recorded_settings_are_all_the_record_keeps(recorded_dir):
    recorded = run_record.recorded_settings(recorded_dir)
    assert (recorded["model"], recorded["strategy"], recorded["num_replicas"]) == (
        "dense", "mirrored", 2)


def test_every_setting_has_a_record_role():
    roles = {field.name: field.metadata[run_record.ROLE] for field in dataclasses.fields(
        RunSettings)}
    assert set(roles.values()) <= set(run_record.ROLES)
    assert [name for name, role in roles.items() if role == run_record.IDENTITY] == [
        "model", "params"]


def test_check_resume_same_model_passes(recorded_dir):
    _check_resume(recorded_dir, _SETTINGS.replace(max_steps=500, strategy="default",
                                                  num_replicas=None))


def test_check_resume_other_model_names_it(recorded_dir):
    with pytest.raises(UsageError, match=r"model must match the run recorded in .*run\.json "
                                         r"\('dense'\).*Received: model='lstm'"):
        _check_resume(recorded_dir, _SETTINGS.replace(model="lstm", params={}))


def test_check_resume_other_params_names_the_param(recorded_dir):
    params = dict(_SETTINGS.params, hidden_units=[16])
    with pytest.raises(UsageError, match=r"params\.hidden_units must match .*\(\[8\]\).*"
                                         r"Received: params\.hidden_units=\[16\]"):
        _check_resume(recorded_dir, _SETTINGS.replace(params=params))


def test_check_resume_checkpoint_without_record_refused(tmp_path):
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-5"\n')
    with pytest.raises(UsageError, match="model_dir must be new or hold a run of "
                                         "estimator_dist.train"):
        _check_resume(str(tmp_path), _SETTINGS)


def test_load_corrupt_record_refused(tmp_path):
    (tmp_path / run_record.FILENAME).write_text("{not json")
    with pytest.raises(UsageError, match="model_dir must hold a readable run.json"):
        run_record.load(str(tmp_path))
