"""A model dir carries between TensorFlow 2.15 and current TensorFlow, both ways.

Each case trains with one end's Python and resumes with the other's, same CLI flags: the
resume starts from the written step and ends at the new one, under "mirrored" (2 replicas)
and two workers ("multi_worker" through the launcher). A SavedModel exported by one end
serves on the other with the same logits. The other end is ``other_end_python``
(conftest). Each test runs both ways from either end, so CI runs them from one end only
(not ``both_ends``): from the other they would repeat the same runs.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.support import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.multi_process, pytest.mark.timeout(900)]

_TIMEOUT = 300
_FLAGS = {
    "mirrored": ["--strategy", "mirrored", "--num-replicas", "2"],
    "multi_worker": ["--strategy", "multi_worker"],
}
# Serves three seeded examples through the export's serving_default, printing the logits.
_SERVE = """
import json, sys
import numpy as np
import tensorflow as tf
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
dim = serve.structured_input_signature[1]["x"].shape[-1]
x = np.random.RandomState(0).rand(3, dim).astype(np.float32)
print(json.dumps(serve(x=tf.constant(x))["logits"].numpy().tolist()))
"""


def _run(python, args):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "PYTHONPATH")}
    env["PYTHONPATH"] = REPO_ROOT  # This checkout's package on either end.
    result = subprocess.run([python, *args], capture_output=True, text=True, env=env,
                            cwd=REPO_ROOT, timeout=_TIMEOUT)
    assert result.returncode == 0, (python, args, result.stderr[-3000:])
    return result.stdout


def _train(python, strategy, model_dir, max_steps, *extra):
    train = ["-m", "estimator_dist.train", *_FLAGS[strategy], "--model-dir", model_dir,
             "--max-steps", str(max_steps), *extra]
    if strategy == "multi_worker":
        return _run(python, ["-m", "estimator_dist.launch", "--workers", "2",
                             "--timeout", str(_TIMEOUT - 30), "--", python, *train])
    return _run(python, train)


def _newest_step(model_dir):
    with open(os.path.join(model_dir, "checkpoint"), encoding="utf-8") as file:
        return int(re.search(r'^model_checkpoint_path: ".*-(\d+)"$', file.read(), re.M)[1])


def _ends(other_end_python):
    return {"this": sys.executable, "other": other_end_python}


def _release(python):
    return _run(python, ["-c", "import tensorflow as tf; print(tf.__version__)"]).split()[-1]


def test_other_end_is_the_other_tensorflow(other_end_python):
    this, other = _release(sys.executable), _release(other_end_python)
    assert (this.startswith("2.15.")) != (other.startswith("2.15.")), (this, other)


@pytest.mark.parametrize("strategy", sorted(_FLAGS))
@pytest.mark.parametrize("writer,reader", [("this", "other"), ("other", "this")])
def test_checkpoint_resumes_on_the_other_end(other_end_python, tmp_path, strategy, writer,
                                             reader):
    ends, model_dir = _ends(other_end_python), str(tmp_path / "model")
    _train(ends[writer], strategy, model_dir, 30, "--no-export")
    assert _newest_step(model_dir) == 30
    resumed = _train(ends[reader], strategy, model_dir, 60, "--no-export")
    assert re.search(r"Resuming dense at step 30 to step 60", resumed), resumed[-2000:]
    if strategy == "mirrored":  # A multi_worker job evaluates in an evaluator task.
        assert re.search(r"^metrics .*\(step 60\)$", resumed, re.M), resumed[-2000:]
    assert _newest_step(model_dir) == 60


@pytest.mark.parametrize("writer,reader", [("this", "other"), ("other", "this")])
def test_saved_model_serves_on_the_other_end(other_end_python, tmp_path, writer, reader):
    ends, model_dir = _ends(other_end_python), str(tmp_path / "model")
    out = _train(ends[writer], "mirrored", model_dir, 20)
    export = re.search(r"^export +(\S+)$", out, re.M)[1]
    served = [np.array(json.loads(_run(ends[end], ["-c", _SERVE, export]).splitlines()[-1]))
              for end in (writer, reader)]
    assert served[0].shape[0] == 3 and np.ptp(served[0]) > 0
    np.testing.assert_allclose(served[1], served[0], rtol=1e-5, atol=1e-6)
