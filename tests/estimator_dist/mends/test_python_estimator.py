"""Every import path TensorFlow 2.15 gave Estimator code resolves on this end: the modules
of ``tensorflow.python.estimator`` and of the Estimator API, each with 2.15's names
(recorded once on 2.15 as ``tests/fixtures/tf215_estimator_imports.json`` by
``record_tf215_estimator_imports.py``). On 2.15 TensorFlow serves them itself."""
import importlib
import json
import os

import pytest
import tensorflow as tf

from estimator_dist.mends import python_estimator

pytestmark = pytest.mark.both_ends

_FIXTURE = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "fixtures",
                        "tf215_estimator_imports.json")


@pytest.fixture(scope="module")
def tf215():
    with open(_FIXTURE, encoding="utf-8") as file:
        return json.load(file)


def test_mend_serves_the_modules_tensorflow_2_15_ships(tf215):
    assert tf215["tensorflow"].startswith("2.15.")
    assert sorted(python_estimator.module_names()) == tf215["python_estimator"]


def test_every_python_estimator_module_imports(tf215):
    failed = {}
    for name in tf215["python_estimator"]:
        try:
            importlib.import_module(name)
        except ImportError as error:
            failed[name] = str(error)
    assert not failed


def test_python_estimator_modules_hold_tensorflow_estimators_objects():
    from tensorflow.python.estimator import estimator, keras, run_config
    from tensorflow.python.estimator.canned import head, optimizers
    from tensorflow.python.estimator.export import export_output

    assert estimator.Estimator is tf.compat.v1.estimator.Estimator
    assert estimator.EstimatorV2 is tf.estimator.Estimator
    assert callable(estimator._load_global_step_from_checkpoint_dir)  # Private names too.
    assert run_config.RunConfig is tf.estimator.RunConfig
    assert keras.model_to_estimator.__module__.endswith("keras_lib")
    assert head._Head is not None and optimizers.get_optimizer_instance is not None
    assert export_output.PredictOutput is tf.estimator.export.PredictOutput


def test_every_api_module_imports_with_its_names(tf215):
    missing = {}
    for name, names in tf215["api_modules"].items():
        module = importlib.import_module(name)
        absent = [n for n in names if not hasattr(module, n)]
        if absent:
            missing[name] = absent
    assert not missing
    from tensorflow.compat.v1.estimator import RunConfig
    from tensorflow.compat.v1.estimator.tpu import TPUEstimator

    assert RunConfig is tf.estimator.RunConfig
    assert issubclass(TPUEstimator, tf.compat.v1.estimator.Estimator)


def test_every_attribute_path_resolves(tf215):
    for path in tf215["attributes"]:
        value = tf
        for part in path.split("."):
            value = getattr(value, part)
        assert callable(value), path


def test_names_outside_tensorflow_2_15s_package_are_not_served():
    with pytest.raises(ModuleNotFoundError, match="tensorflow.python.estimator.canned.dnn_"
                                                  "testing_utils"):
        importlib.import_module("tensorflow.python.estimator.canned.dnn_testing_utils")
