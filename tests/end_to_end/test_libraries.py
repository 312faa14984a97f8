"""Libraries built on Estimator, in the style of their own published examples
(docs/legacy.md, "Libraries built on Estimator"): a deepctr CTR program
(``tests/programs/deepctr_ctr.py``) and a tensorflow_ranking program
(``tests/programs/ranking_estimator.py``), each under "default" (the program as written: no
estimator_dist line), "mirrored" (the config line changed) and "multi_worker" (two local
workers by the launcher). Under a strategy each program first hands the library's own
input_fn to ``train`` and prints the refusal, which must name that function and its file.

The programs import the library before anything of estimator_dist, as users' programs do:
on TensorFlow 2.16+ ``tf.estimator`` and ``tensorflow.python.estimator`` come from the
interpreter-start hook, which the suite turns off elsewhere and on here.

deepctr is in the ``test`` extra. tensorflow-ranking pins ``tensorflow<2.16`` (pip refuses
it on Python 3.12 and would pull the full TensorFlow wheel beside tensorflow-cpu on 3.11),
so it is installed here as docs/install.md says a user does it: ``pip install --no-deps``,
into a folder of this pytest run put on the programs' ``PYTHONPATH``, unless it is installed.
"""
import importlib.util
import json
import math
import os
import re
import subprocess
import sys

import pytest

import estimator_dist_startup
from estimator_dist import installation
from estimator_dist.mends import releases
from tests.support import REPO_ROOT, run_pythons

pytestmark = [pytest.mark.slow, pytest.mark.both_ends, pytest.mark.timeout(900)]

_RUN_SECONDS = 600
_RANKING = "tensorflow-ranking==0.5.5"
_PROGRAMS = {"deepctr": "deepctr_ctr.py", "ranking": "ranking_estimator.py"}
_WORKERS = ("worker 0", "worker 1")
_LINE = re.compile(r"^(?:\[(worker \d)\] )?(RESULT \w+|REFUSED \w+) (.*)$")
# The library function each refusal must name, as module.qualname and file.
_REFUSED = {
    "deepctr": {
        "input_fn_tfrecord": (r"deepctr\.estimator\.inputs\.input_fn_tfrecord\.<locals>\."
                              r"input_fn", r"deepctr/estimator/inputs\.py"),
        "input_fn_pandas": (r"tensorflow_estimator\.python\.estimator\.inputs\.pandas_io\."
                            r"pandas_input_fn\.<locals>\.input_fn",
                            r"tensorflow_estimator/python/estimator/inputs/pandas_io\.py"),
    },
    "ranking": {"input_fn": (r"__main__\.main\.<locals>\.<lambda>",
                             r"tests/programs/ranking_estimator\.py")},
}


@pytest.fixture(scope="session")
def library_env(tmp_path_factory):
    """The programs' environment: the interpreter-start hook on, tensorflow_ranking
    importable (``pip install --no-deps`` into a session folder when it is not installed)."""
    current = releases.tensorflow_release() in releases.CURRENT
    if current and installation.startup_hook_file() is None:
        pytest.fail(f"no {estimator_dist_startup.PTH} in site-packages: the programs need "
                    "the interpreter-start hook on this TensorFlow; pip install . (or -e .)")
    env = {estimator_dist_startup.VARIABLE: "1"}
    if importlib.util.find_spec("tensorflow_ranking") is not None:
        return env
    target = tmp_path_factory.mktemp("no_deps")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                          "--target", str(target), _RANKING],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, f"pip install --no-deps {_RANKING}: {pip.stderr[-2000:]}"
    path = [str(target), os.environ.get("PYTHONPATH", "")]
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def _outcomes(stdout):
    """{(task, "RESULT deepctr" / "REFUSED input_fn"): text}; task "" for one process."""
    found = {}
    for line in stdout.splitlines():
        match = _LINE.match(line.strip())
        if match:
            task, kind, text = match.groups()
            found[(task or "", kind)] = text
    return found


def _run(library, strategy, model_dir, env):
    program = os.path.join(REPO_ROOT, "tests", "programs", _PROGRAMS[library])
    args = [program, str(model_dir), strategy]
    if strategy == "multi_worker":
        args = ["-m", "estimator_dist.launch", "--workers", "2", "--timeout",
                str(_RUN_SECONDS), "--", sys.executable, *args]
    result = run_pythons([args], timeout=_RUN_SECONDS + 60, env=env)[0]
    return _outcomes(result.stdout), result.stdout[-3000:] + result.stderr[-5000:]


def _check_refusals(library, outcomes, tasks, log):
    for name, (function, path) in _REFUSED[library].items():
        for task in tasks:
            text = outcomes.get((task, f"REFUSED {name}"))
            assert text, f"no refusal of {name} from {task or 'the process'}:\n{log}"
            assert re.match(rf"UsageError: input_fn must return a tf\.data\.Dataset .*"
                            rf"from {function} \(\S*{path}:\d+\)", text), text


def _check_deepctr(result, strategy, task):
    """Every strategy trains the same steps. A non-chief worker evaluates the newest
    checkpoint when it gets there, which may precede the chief's last (docs/legacy.md):
    one that evaluated before the chief saved step 10 read step 0 in one run on 2.21."""
    del strategy  # Unused.
    for kind, step in (("tfrecord", 10), ("pandas", 20)):
        metrics = result[kind]
        if task in ("", "worker 0"):
            assert metrics["global_step"] == step
        else:
            assert 0 <= metrics["global_step"] <= step
        assert math.isfinite(metrics["LogLoss"]) and 0 <= metrics["AUC"] <= 1


def _check_ranking(result, strategy, task):
    del task  # Every task reports the final step it trained to.
    assert result["final_step"] == 20
    if strategy != "multi_worker":  # Evaluation and export run in an evaluator task there.
        assert math.isfinite(result["loss"]) and result["exports"] >= 1
        assert 0 < result["metric/ndcg@1"] <= 1


_CHECKS = {"deepctr": _check_deepctr, "ranking": _check_ranking}


def _cases():
    for library in _PROGRAMS:
        for strategy in ("default", "mirrored", "multi_worker"):
            marks = [pytest.mark.multi_process] if strategy == "multi_worker" else []
            yield pytest.param(library, strategy, id=f"{library}-{strategy}", marks=marks)


@pytest.mark.parametrize("library,strategy", _cases())
def test_library_example_trains(library, strategy, library_env, tmp_path):
    outcomes, log = _run(library, strategy, tmp_path / "model", library_env)
    tasks = _WORKERS if strategy == "multi_worker" else ("",)
    if strategy != "default":
        _check_refusals(library, outcomes, tasks, log)
    for task in tasks:
        text = outcomes.get((task, f"RESULT {library}"))
        assert text, f"no result from {task or 'the process'}:\n{log}"
        _CHECKS[library](json.loads(text), strategy, task)
