"""RunSettings: checked fields, unknown keys by name, merging layers, safe file loading."""
import json
import re

import pytest

from estimator_dist import config_files
from estimator_dist.job import settings as settings_lib
from estimator_dist.errors import UsageError


def test_from_dict_unknown_key_suggests_nearest():
    with pytest.raises(UsageError, match=r"did you mean 'max_steps'\?\)\. Received: unknown key "
                                         r"'max_step'"):
        settings_lib.RunSettings.from_dict({"max_step": 10})


def test_from_dict_hyphenated_key_suggests_underscore_name():
    with pytest.raises(UsageError, match="did you mean 'batch_size'"):
        settings_lib.RunSettings.from_dict({"batch-size": 32})


def test_from_dict_not_mapping_refused():
    with pytest.raises(UsageError, match="must be a mapping of settings. Received: list"):
        settings_lib.RunSettings.from_dict([1, 2])


@pytest.mark.parametrize("key,value,rule", [
    ("max_steps", 0, "a positive int"),
    ("batch_size", "64", "a positive int"),
    ("model", "cnn", "one of dense, lstm"),
    ("strategy", "mirror", "one of default, mirrored, multi_worker, parameter_server, tpu"),
    ("model_dir", "", "a non-empty string"),
    ("export", "yes", "true or false"),
    ("seed", -1, "a non-negative int"),
    ("params", ["learning_rate"], "a mapping of parameter names to values"),
])
def test_field_bad_value_names_field_rule_and_value(key, value, rule):
    with pytest.raises(UsageError, match=rf"{key} must be {rule}\. Received: {key}="):
        settings_lib.RunSettings.from_dict({key: value})


def test_tpu_validate_without_tpu_strategy_refused():
    with pytest.raises(UsageError, match="tpu_validate applies to strategy 'tpu' only"):
        settings_lib.RunSettings(tpu_validate=True)


def test_replace_checks_the_copy_and_keeps_the_original():
    settings = settings_lib.RunSettings()
    with pytest.raises(UsageError, match="max_steps must be a positive int"):
        settings.replace(max_steps=-5)
    assert settings.replace(max_steps=5).max_steps == 5 and settings.max_steps is None


def test_merge_later_layers_win_and_params_merge_by_key():
    merged = settings_lib.merge(
        {"model": "dense", "params": {"learning_rate": 0.1, "dropout": 0.2}},
        {"model": "lstm", "params": {"learning_rate": 0.5}})
    assert merged == {"model": "lstm", "params": {"learning_rate": 0.5, "dropout": 0.2}}


def test_load_file_reads_yaml_and_json(tmp_path):
    (tmp_path / "a.yaml").write_text("model: lstm\nparams:\n  num_units: 8\n")
    (tmp_path / "b.json").write_text(json.dumps({"max_steps": 7}))
    assert config_files.load_file(tmp_path / "a.yaml") == {"model": "lstm",
                                                           "params": {"num_units": 8}}
    assert config_files.load_file(tmp_path / "b.json") == {"max_steps": 7}


def test_load_file_empty_yaml_is_no_settings(tmp_path):
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    assert config_files.load_file(tmp_path / "empty.yaml") == {}


def test_load_file_missing_refused(tmp_path):
    with pytest.raises(UsageError, match=r"config file must be a readable file\. Received: .*"
                                         r"nope\.yaml' \(No such file or directory\)"):
        config_files.load_file(tmp_path / "nope.yaml")


def test_load_file_python_tag_refused_by_safe_loading(tmp_path):
    (tmp_path / "evil.yaml").write_text("!!python/object/apply:os.system ['true']\n")
    with pytest.raises(UsageError, match="config file must be valid YAML"):
        config_files.load_file(tmp_path / "evil.yaml")


def test_load_file_invalid_json_refused(tmp_path):
    (tmp_path / "bad.json").write_text("{max_steps: 3")
    with pytest.raises(UsageError, match="config file must be valid JSON"):
        config_files.load_file(tmp_path / "bad.json")


def test_load_file_yaml_alias_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("a: &x [1, 2]\nb: *x\n")
    with pytest.raises(UsageError, match=r"aliases \(\*x\) are not allowed"):
        config_files.load_file(tmp_path / "a.yaml")


def test_load_file_yaml_duplicate_nested_key_refused(tmp_path):
    (tmp_path / "d.yaml").write_text("params:\n  num_units: 8\n  num_units: 9\n")
    with pytest.raises(UsageError, match=r"duplicate key 'num_units' at line 3"):
        config_files.load_file(tmp_path / "d.yaml")


@pytest.mark.parametrize("values,message", [
    ({"max_steps": 2**31}, r"max_steps must be at most 2,147,483,647"),
    ({"num_replicas": 65}, r"num_replicas must be at most 64"),
    ({"max_steps": 20_002, "save_checkpoints_steps": 2},
     r"save_checkpoints_steps must leave at most 10,000 checkpoints .* so at least 3\."),
    ({"params": {"learning_rate": float("nan")}}, r"params\.learning_rate must be finite"),
    ({"params": {"hidden_units": [8, float("inf")]}}, r"params\.hidden_units must be finite"),
    ({"tpu_name": "t"}, r"tpu_name applies to strategy='tpu' only"),
    ({"export": False, "export_dir": "e"}, r"export_dir applies to export=True only"),
])
def test_from_dict_out_of_bounds_or_idle_setting_refused(values, message):
    with pytest.raises(UsageError, match=message):
        settings_lib.RunSettings.from_dict(values)


def test_from_dict_settings_at_their_bounds_accepted():
    settings = settings_lib.RunSettings.from_dict({"max_steps": 2**31 - 1, "num_replicas": 64,
                                             "strategy": "mirrored", "tpu_name": None})
    assert settings.max_steps == settings_lib.MAX_STEPS


@pytest.mark.parametrize("name", sorted(settings_lib.MAXIMA))
def test_numeric_setting_past_bound_refused(name):
    limit = settings_lib.MAXIMA[name]
    with pytest.raises(UsageError, match=rf"{name} must be at most {limit:,}\. "
                                         rf"Received: {name}={limit + 1}"):
        settings_lib.RunSettings(**{name: limit + 1})


def test_every_numeric_flag_states_its_bound_in_help():
    from estimator_dist.commands import train

    text = " ".join(train.train_parser().format_help().split())
    for name, limit in settings_lib.MAXIMA.items():
        flag = "--" + name.replace("_", "-")
        assert re.search(rf"{flag} N .*?at most {limit:,}", text) or re.search(
            rf"{flag} SECONDS .*?at most {limit:,}", text), flag
