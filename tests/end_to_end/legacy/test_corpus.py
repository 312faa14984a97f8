"""The legacy corpus: real-style Estimator programs under every route and both behaviours.

Each program runs with only its config line changed (``tests/end_to_end/legacy/runner.py``) and
reports its own outcome line. The programs of a route and behaviour run one after another
in one process, as a user's script that trains several models does (TF's import and a
cluster's start are most of a program's time): "default", "mirrored" (2 replicas) and
"tpu" (``TPUEstimator`` on CPU) in one process, "multi_worker" in each of two local worker
processes, "parameter_server" (one program) on a chief, a worker and a ps. TF1 behaviour
is ``tf.compat.v1.disable_v2_behavior()`` at the top of the process. The runs of a route
under both behaviours are independent and start together.
"""
import json
import math
import os
import re
import sys

import pytest

from estimator_dist import mends
from tests.support import run_pythons
from tests.end_to_end.legacy import corpus

pytestmark = [pytest.mark.slow, pytest.mark.both_ends, pytest.mark.timeout(1200)]

_GROUP_TIMEOUT = 1000
# Launch flags of a cluster route, and the tasks that report an outcome.
_CLUSTER_TASKS = {
    "multi_worker": (["--workers", "2"], ("worker 0", "worker 1")),
    "parameter_server": (["--workers", "2", "--ps", "1"], ("chief 0", "worker 0")),
}
_OUTCOME = re.compile(r"^(?:\[(\w+ \d+)\] )?(RESULT|ERROR) (\w+) (.*)$")


def _runner_args(programs, behaviour, strategy, model_dir):
    return ["-m", "tests.end_to_end.legacy.runner", *programs, "--behaviour", behaviour,
            "--strategy", strategy, "--model-dir", model_dir]


def _parse(stdout):
    """{(task, program): (kind, text)} from the runner's outcome lines; task is the launch
    prefix ("worker 1") or "" for a single process."""
    outcomes = {}
    for line in stdout.splitlines():
        match = _OUTCOME.match(line.strip())
        if match:
            task, kind, program, text = match.groups()
            outcomes[(task or "", program)] = (kind, text)
    return outcomes


# Programs that a cluster route runs in processes of their own, and why: what a worker's
# TensorFlow server keeps from one Estimator to the next in the process.
_OWN_CLUSTER = {
    # Under TF1 behaviour the process's server starts once, with the first Estimator's
    # session_config; another one is refused (mend cluster_train).
    "wide_deep_replace": "its own session_config",
    # The server keeps resource variables by name: its Keras layers' "dense" variables
    # exist there already with other shapes ("assign ... with wrong shape").
    "keras_model_to_estimator": "variable names of another program's shapes",
}


def _batch(program, strategy):
    """The programs that share ``program``'s processes on ``strategy``: every program of
    the route, one after another, each with its own config (under TF1 behaviour each
    multi-worker config's collectives take keys of their own, mend ``collective_keys``),
    but on a cluster a program of ``_OWN_CLUSTER`` runs alone."""
    if strategy in _CLUSTER_TASKS and program in _OWN_CLUSTER:
        return (program,)
    return tuple(p for p, outcomes in corpus.EXPECTED.items() if strategy in outcomes
                 and not (strategy in _CLUSTER_TASKS and p in _OWN_CLUSTER))


def _batch_args(programs, behaviour, strategy, model_dir):
    """The python arguments that run ``programs`` in one process, or in each task of a
    local cluster."""
    args = _runner_args(programs, behaviour, strategy, model_dir)
    if strategy in _CLUSTER_TASKS:
        args = ["-m", "estimator_dist.launch", *_CLUSTER_TASKS[strategy][0],
                "--timeout", str(_GROUP_TIMEOUT), "--", sys.executable, *args]
    return args


_RESULTS = {}  # (programs, behaviour, strategy) -> (outcomes, log)


def _run_batches(keys, model_dir_of):
    """Runs the batches ``keys`` (programs, behaviour, strategy) not run yet, at once: each
    is its own process or its own local cluster (a launcher has its own network
    namespace), and most of a run's time is TensorFlow's import and start."""
    todo = [key for key in keys if key not in _RESULTS]
    if todo:
        done = run_pythons([_batch_args(*key, model_dir_of(*key)) for key in todo],
                           timeout=_GROUP_TIMEOUT + 60)
        for key, result in zip(todo, done):
            _RESULTS[key] = (_parse(result.stdout),
                             result.stdout[-3000:] + result.stderr[-3000:])
    return [_RESULTS[key] for key in keys]


def _check_trained(result, chief, program, strategy):
    """Finite losses; the chief also ends at the last step (another task's evaluate may
    read an earlier checkpoint; asynchronous parameter-server workers may pass it by
    a step or two)."""
    metrics = json.loads(result)
    if chief:
        step = metrics.get("global_step", metrics.get("final_step"))
        slack = 2 if strategy == "parameter_server" else 0
        last = corpus.final_step(program, strategy)
        assert last <= step <= last + slack
    losses = [v for k, v in metrics.items() if "loss" in k]
    assert all(math.isfinite(v) for v in losses)


def _route_marks(program, strategy):
    """A cluster route is multi_process; under ``pytest -n N`` the tests that share a
    batch (the programs of a route, both behaviours) run on one worker, which runs the
    batch once."""
    group = pytest.mark.xdist_group(f"legacy-{strategy}-{_batch(program, strategy)[0]}")
    return [group, pytest.mark.multi_process] if strategy in _CLUSTER_TASKS else [group]


_ROUTES = [pytest.param(program, strategy, id=f"{program}-{strategy}",
                        marks=_route_marks(program, strategy))
           for program, strategy in corpus.routes()]


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("legacy_corpus")


def _selected_behaviours(request, program, strategy):
    """The behaviours of this route whose tests this session runs (this test's among
    them): their batches run together."""
    name = request.node.originalname
    ids = {item.name for item in request.session.items}
    return [b for b in corpus.BEHAVIOURS if f"{name}[{program}-{strategy}-{b}]" in ids]


@pytest.mark.parametrize("behaviour", corpus.BEHAVIOURS)
@pytest.mark.parametrize("program,strategy", _ROUTES)
def test_program_outcome_matches_table(program, strategy, behaviour, corpus_dir, request):
    expected = corpus.expected(program, strategy, mends.tensorflow_release(), os.environ)
    programs = _batch(program, strategy)
    behaviours = _selected_behaviours(request, program, strategy) or [behaviour]
    results = _run_batches(
        [(programs, b, strategy) for b in behaviours],
        lambda programs, b, strategy: str(corpus_dir / f"{b}_{strategy}_{programs[0]}"))
    outcomes, log = results[behaviours.index(behaviour)]
    tasks = _CLUSTER_TASKS[strategy][1] if strategy in _CLUSTER_TASKS else ("",)
    if expected == corpus.TRAINS:
        for task in tasks:
            assert (task, program) in outcomes, f"no outcome from {task or 'the process'}:\n{log}"
            kind, text = outcomes[(task, program)]
            assert kind == "RESULT", text
            _check_trained(text, task == tasks[0], program, strategy)
        return
    # The first task to fail ends the cluster: the launcher stops the others, which may
    # not have reached the failing call yet. Every task that reports names the error.
    reported = [outcomes[(task, program)] for task in tasks if (task, program) in outcomes]
    assert reported, f"no outcome from {' or '.join(tasks) or 'the process'}:\n{log}"
    for kind, text in reported:
        assert kind == "ERROR" and re.match(corpus.ERRORS[expected], text), text
    if len(reported) < len(tasks):
        assert "stopping the other tasks" in log, log


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_model_to_estimator_trains_with_legacy_keras(strategy, tmp_path):
    """TF_USE_LEGACY_KERAS=1, the way out the Keras 3 refusal names, trains the program on
    current TensorFlow, in both behaviours. (On 2.15 tf.keras is Keras 2 already and
    tf-keras is not installed, where the variable would stop TensorFlow's Keras from
    loading: the program runs as written.)"""
    legacy_keras = {} if mends.tensorflow_release() == "2.15" else {"TF_USE_LEGACY_KERAS": "1"}
    results = run_pythons([_runner_args(["keras_model_to_estimator"], behaviour, strategy,
                                        str(tmp_path / behaviour))
                           for behaviour in corpus.BEHAVIOURS],
                          timeout=_GROUP_TIMEOUT, env=legacy_keras)
    for result in results:
        outcome = _parse(result.stdout).get(("", "keras_model_to_estimator"))
        assert outcome and outcome[0] == "RESULT", result.stdout[-2000:] + result.stderr[-2000:]
        _check_trained(outcome[1], True, "keras_model_to_estimator", strategy)
