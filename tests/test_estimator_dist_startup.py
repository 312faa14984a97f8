"""The interpreter-start hook as installed (``estimator_dist_startup.pth`` in site-packages):
it imports nothing as Python starts; once TensorFlow (here tensorflow-estimator, first) is
imported, a program that never imports estimator_dist has ``tf.estimator`` and
``tensorflow.python.estimator`` on 2.16+; on 2.15 it steps aside. The suite runs its other
children with it off (``ESTIMATOR_DIST_STARTUP_HOOK=0``, conftest.py)."""
import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

import estimator_dist_startup
from estimator_dist import installation, mends
from estimator_dist.mends import releases

_CURRENT = releases.tensorflow_release() in releases.CURRENT
_MODULES = "import json, sys; print(json.dumps(sorted(sys.modules)))"
_MODEL = """
def model_fn(features, labels, mode):
    weights = tf.compat.v1.get_variable("w", [2, 1])
    loss = tf.reduce_mean(tf.square(tf.matmul(features["x"], weights) - labels))
    step = tf.compat.v1.train.get_or_create_global_step()
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, step)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

def input_fn():
    x = tf.ones([4, 2])
    return tf.data.Dataset.from_tensors(({"x": x}, tf.ones([4, 1])))
"""
_PROGRAM = """
import json, sys, tempfile
import tensorflow_estimator  # Before TensorFlow, as a library may.
import tensorflow as tf
from tensorflow.python.estimator import estimator as estimator_module
""" + _MODEL + """
estimator = tf.estimator.Estimator(model_fn, model_dir=tempfile.mkdtemp())
estimator.train(input_fn, steps=1)
print(json.dumps({"package": "estimator_dist" in sys.modules,
                  "same": estimator_module.EstimatorV2 is tf.estimator.Estimator,
                  "step": int(estimator.get_variable_value("global_step"))}))
"""
# Keras first, as Keras 3 programs begin (Keras imports TensorFlow), then Estimator by its
# names: their first use installs the mends once Keras's import has ended.
_KERAS_FIRST = """
import json, sys, tempfile
import keras
import tensorflow as tf
waited = "tensorflow_estimator" not in sys.modules
from tensorflow.compat.v1.estimator import RunConfig
""" + _MODEL + """
config = RunConfig(model_dir=tempfile.mkdtemp()).replace(save_summary_steps=1)
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn, steps=1)
print(json.dumps({"package": "estimator_dist" in sys.modules, "waited": waited,
                  "v1": tf.compat.v1.estimator.RunConfig is RunConfig,
                  "step": int(estimator.get_variable_value("global_step"))}))
"""
# A Keras 3 program that never uses Estimator: the mends wait, and nothing is said.
_KERAS_ONLY = """
import json, sys
import keras
import numpy as np
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
model.predict(np.ones((1, 2), np.float32), verbose=0)
print(json.dumps({"estimator": "tensorflow_estimator" in sys.modules}))
"""


@pytest.fixture(scope="module")
def installed_hook():
    """The installed .pth file; a failure when the package is installed without it."""
    try:
        importlib.metadata.distribution("estimator-dist")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("estimator-dist is not installed (a checkout on PYTHONPATH): no hook")
    path = installation.startup_hook_file()
    if path is None:
        pytest.fail("estimator-dist is installed without its interpreter-start hook (no "
                    f"{estimator_dist_startup.PTH} in site-packages): reinstall it, "
                    "pip install . (or pip install -e .)")
    return path


def _run(code, *, hook, timeout, cwd, env=None):
    env = {k: v for k, v in os.environ.items()
           if k not in (estimator_dist_startup.VARIABLE, "TF_CONFIG")} | (env or {})
    if not hook:
        env[estimator_dist_startup.VARIABLE] = "0"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


@pytest.mark.timeout(120)
def test_hook_imports_nothing_at_start(installed_hook, tmp_path):
    on, off = (_run(_MODULES, hook=hook, timeout=60, cwd=tmp_path) for hook in (True, False))
    assert on.returncode == off.returncode == 0, on.stderr + off.stderr
    on_modules, off_modules = json.loads(on.stdout), json.loads(off.stdout)
    assert "estimator_dist_startup" in on_modules
    assert set(on_modules) == set(off_modules)
    assert not [m for m in on_modules if m.split(".")[0] in ("estimator_dist", "tensorflow")]


@pytest.mark.both_ends
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_program_that_never_imports_the_package_trains_an_estimator(installed_hook, tmp_path):
    done = _run(_PROGRAM, hook=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    # On 2.15 TensorFlow's own Estimator serves it all; the hook steps aside.
    assert facts == {"package": _CURRENT, "same": True, "step": 1}


@pytest.mark.both_ends
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_mends_failing_under_the_hook_leave_tensorflow_importable(installed_hook, tmp_path):
    """A restoring mend turned off by name: tensorflow-estimator cannot import, which the
    hook says in one line, and the program's ``import tensorflow`` still works."""
    done = _run("import tensorflow as tf; print(hasattr(tf, 'estimator'))", hook=True,
                timeout=240, cwd=tmp_path, env={mends.OFF_VARIABLE: "estimator_training"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == str(not _CURRENT)
    said = [line for line in done.stderr.splitlines()
            if line.startswith("estimator_dist_startup: ")]
    assert len(said) == int(_CURRENT), said
    assert all(line.startswith("estimator_dist_startup: tf.estimator is not restored (turn "
                               "this hook off with ESTIMATOR_DIST_STARTUP_HOOK=0). Received: "
                               "ImportError: cannot import name 'estimator_training'")
               for line in said)


def _said(stderr):
    return [line for line in stderr.splitlines()
            if line.startswith(("estimator_dist_startup: ", "estimator_dist: "))]


@pytest.mark.both_ends
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_program_that_imports_keras_first_trains_an_estimator(installed_hook, tmp_path):
    """Keras's import, under way when TensorFlow's ends, cannot give tensorflow-estimator
    the Keras attributes it reads (``tf.losses``): the mends wait for ``tf.estimator``'s
    first use, which gets it as a program that imports TensorFlow first does; nothing is
    said on stderr."""
    done = _run(_KERAS_FIRST, hook=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _said(done.stderr) == []
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    # On 2.15 TensorFlow's own Estimator, which it loads at first use too, serves it all.
    assert facts == {"package": _CURRENT, "waited": True, "v1": True, "step": 1}


@pytest.mark.both_ends
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_keras_program_without_estimator_installs_no_mends_and_says_nothing(installed_hook,
                                                                           tmp_path):
    done = _run(_KERAS_ONLY, hook=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _said(done.stderr) == []
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"estimator": False}
