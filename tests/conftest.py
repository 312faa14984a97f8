"""Shared fixtures.

The test process gets four logical CPU devices before anything starts the TF runtime,
so mirrored tests with 2 and 4 replicas run in-process.
"""
import os
import subprocess

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The suite's child processes import estimator_dist where they say so, and the plain
# TensorFlow probes show TensorFlow's own behaviour: the interpreter-start hook is off for
# them (tests/test_estimator_dist_startup.py turns it on where it tests it).
os.environ["ESTIMATOR_DIST_STARTUP_HOOK"] = "0"

from tests.support import REPO_ROOT, TF1_BEHAVIOUR_ENV, run_python  # noqa: E402

# TF1 behaviour, as legacy scripts set it, must come before anything else touches TF.
if os.environ.get(TF1_BEHAVIOUR_ENV) == "1":
    import tensorflow  # noqa: E402

    tensorflow.compat.v1.disable_v2_behavior()

import estimator_dist  # noqa: E402  (after the log level is set)

# Tests marked alone run with no other test beside them under `pytest -n N` (tests/sharing.py);
# ESTIMATOR_DIST_TEST_TIMES=FILE records every test's time (tests/timing.py); a test whose
# process hangs beyond pytest-timeout's reach ends it (tests/hang_guard.py); temporary files
# stay in the run's directory (tests/scratch.py).
pytest_plugins = ("tests.sharing", "tests.timing", "tests.hang_guard", "tests.scratch",
                  "pytester")

CPU_DEVICES = 4
estimator_dist.setup_cpu_replicas(CPU_DEVICES)


_END_TO_END = os.path.join(os.path.dirname(os.path.abspath(__file__)), "end_to_end")


def pytest_collection_modifyitems(items):
    """Marks each test ``end_to_end`` (under tests/end_to_end) or ``unit`` (the rest of what
    is neither slow nor multi_process), so ``pytest -m unit`` runs the unit part."""
    for item in items:
        if str(item.path).startswith(_END_TO_END + os.sep):
            item.add_marker(pytest.mark.end_to_end)
        elif not {mark.name for mark in item.iter_markers()} & {"slow", "multi_process"}:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(autouse=True)
def _tf_config_restored():
    """Puts ``TF_CONFIG`` back after each test: building a cluster strategy writes the
    resolved cluster there for TensorFlow (``cluster_sources.write_tf_config``)."""
    before = os.environ.get("TF_CONFIG")
    yield
    if before is None:
        os.environ.pop("TF_CONFIG", None)
    else:
        os.environ["TF_CONFIG"] = before


@pytest.fixture
def model_dir(tmp_path):
    """A fresh model directory (as a str, the way Estimator takes it)."""
    return str(tmp_path / "model")


@pytest.fixture
def python_run():
    """``run_python`` as a fixture."""
    return run_python


# The other supported TensorFlow end (2.15 here when this is current TF, and the reverse),
# for the tests of what carries between them: its Python, with estimator-dist and its
# TensorFlow installed. .ci/run builds both ends and names the other one here.
OTHER_PYTHON_ENV = "ESTIMATOR_DIST_OTHER_PYTHON"
_OTHER_VENVS = os.path.join(os.path.expanduser("~"), ".cache", "estimator-dist", "other-end")


def _interpreter_of_the_other_end(current):
    """A Python whose ``pip install .`` gives the other end, or None: 3.12+ gives current
    TensorFlow, 3.9-3.11 gives 2.15 (setup.py)."""
    versions = ("3.11", "3.10", "3.9") if current else ("3.12", "3.13")
    roots = [os.path.join(os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")),
                          "versions")]
    for version in versions:
        for root in roots:
            found = sorted(d for d in (os.listdir(root) if os.path.isdir(root) else [])
                           if d == version or d.startswith(version + "."))
            if found:
                return os.path.join(root, found[-1], "bin", "python3")
    return None


def _build_other_end(python, venv):
    """A venv of ``python`` with this checkout installed (kept for later runs)."""
    marker = os.path.join(venv, "installed-from")
    if os.path.exists(marker):
        return os.path.join(venv, "bin", "python")
    subprocess.run([python, "-m", "venv", venv], check=True, timeout=300)
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run(pip + [REPO_ROOT], check=True, timeout=1800, capture_output=True)
    with open(marker, "w", encoding="utf-8") as file:
        file.write(REPO_ROOT)
    return os.path.join(venv, "bin", "python")


@pytest.fixture(scope="session")
def other_end_python():
    """The other TensorFlow end's Python: ``$ESTIMATOR_DIST_OTHER_PYTHON``, else a venv
    built once from this checkout with a Python of the other end found under pyenv."""
    if os.environ.get(OTHER_PYTHON_ENV):
        return os.environ[OTHER_PYTHON_ENV]
    from estimator_dist import mends

    current = mends.tensorflow_release() != "2.15"
    python = _interpreter_of_the_other_end(current)
    if python is None:
        pytest.skip(f"no Python of the other TensorFlow end here: set {OTHER_PYTHON_ENV} to "
                    "one with estimator-dist installed")
    return _build_other_end(python, os.path.join(_OTHER_VENVS, "current" if not current
                                                 else "legacy"))
