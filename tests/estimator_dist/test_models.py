"""The one table of built-in models: the commands and to_keras read their names from it."""
import subprocess
import sys

import pytest

import model_fns
from estimator_dist import models
from estimator_dist.commands import train
from estimator_dist.job import settings as settings_lib
from estimator_dist.conversion import keras_conversion
from estimator_dist.errors import UsageError


@pytest.mark.parametrize("name, module, model_fn", [
    ("dense", model_fns.dense, model_fns.dense_classifier_model_fn),
    ("lstm", model_fns.lstm, model_fns.lstm_model_fn),
])
def test_entry_loads_its_model_fn_params_and_resolver(name, module, model_fn):
    model = models.MODELS[name]
    assert model.name == name
    assert model.model_fn is model_fn
    assert model.params_table is module.PARAMS
    assert model.resolve_params(model.params) == module.resolve_params(model.params)


def test_cli_choices_are_the_table():
    (action,) = [a for a in train.train_parser()._actions
                 if "--model" in a.option_strings]
    assert tuple(action.choices) == models.NAMES == ("dense", "lstm")


def test_settings_refuse_a_name_outside_the_table():
    with pytest.raises(UsageError, match=r"^model must be one of dense, lstm\. "
                                         r"Received: model='cnn'$"):
        settings_lib.RunSettings(model="cnn")


def test_to_keras_refuses_a_name_outside_the_table(tmp_path):
    with pytest.raises(UsageError, match=r"^model must be one of dense, lstm\. "
                                         r"Received: model='cnn'$"):
        keras_conversion._recorded_model(
            str(tmp_path), "cnn", {})


def test_table_and_settings_import_no_tensorflow():
    code = ("import sys; import estimator_dist.models, estimator_dist.job.settings; "
            "print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"
