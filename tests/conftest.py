"""Shared fixtures.

The test process gets four logical CPU devices before anything starts the TF runtime,
so mirrored tests with 2 and 4 replicas run in-process.
"""
import os
import subprocess
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# TF1 behaviour, as legacy scripts set it, must come before anything else touches TF.
TF1_BEHAVIOUR_ENV = "ESTIMATOR_DIST_TEST_TF1_BEHAVIOUR"
if os.environ.get(TF1_BEHAVIOUR_ENV) == "1":
    import tensorflow  # noqa: E402

    tensorflow.compat.v1.disable_v2_behavior()

import estimator_dist  # noqa: E402  (after the log level is set)

CPU_DEVICES = 4
estimator_dist.setup_cpu_replicas(CPU_DEVICES)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def run_python(args, *, timeout, env=None, cwd=None):
    """Runs ``python ARGS`` in a subprocess with a time limit; returns CompletedProcess."""
    full_env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd or REPO_ROOT)


def assert_passes_under_tf1_behaviour(test_file, *pytest_args, timeout):
    """Runs the tests of ``test_file`` again in a process that calls
    ``tf.compat.v1.disable_v2_behavior()`` first (what legacy scripts do; it can only
    happen before TF starts) and asserts they pass."""
    done = run_python(["-m", "pytest", test_file, "-q", "-p", "no:cacheprovider", *pytest_args],
                      timeout=timeout, env={TF1_BEHAVIOUR_ENV: "1"})
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert done.returncode == 0, "\n".join(failed) or done.stdout[-3000:]


@pytest.fixture
def python_run():
    """``run_python`` as a fixture."""
    return run_python
