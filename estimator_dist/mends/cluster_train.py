"""``estimator.train`` on a cluster: the route ``train_and_evaluate`` takes, minus evaluation.

With ``TF_CONFIG`` set, ``RunConfig`` puts the distribute coordinator in INDEPENDENT_WORKER
mode, and TF 2.15's ``Estimator.train`` then refuses to run: "Only `STANDALONE_CLIENT`
mode is supported when you call `estimator.train`" (``estimator_training.estimator_train``,
read). ``train_and_evaluate`` trains in that mode by handing each task to
``run_distribute_coordinator``, whose worker function copies the Estimator, fills its
config from the worker context and trains the copy with the coordinator mode cleared.

``install()`` (mend ``cluster_train`` of ``mends.catalogue``, installed by ``make_run_config``
for "multi_worker" and "parameter_server")
makes ``Estimator.train`` take that same route in INDEPENDENT_WORKER mode: a worker trains,
a ``ps`` task serves variables until it is stopped, as under ``train_and_evaluate``. Other
modes keep TensorFlow's own behaviour.

The coordinator starts the task's server once a process, with the first Estimator's
``session_config``; a later Estimator of the process with another one failed a bare
``assert`` in ``distribute_coordinator._run_std_server`` (TF1 behaviour). It is refused
here in one line instead.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable

from tensorflow.python.distribute import distribute_coordinator as dc
from tensorflow.python.distribute import distribute_coordinator_context as dc_context
from tensorflow.python.distribute import estimator_training

from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    import tensorflow as tf

_TF_ESTIMATOR_TRAIN = estimator_training.estimator_train


def _estimator_train(estimator: tf.estimator.Estimator, train_distributed_fn: Callable[..., Any],
                     hooks: Any) -> Any:
    """``estimator_training.estimator_train`` that also runs in INDEPENDENT_WORKER mode."""
    config = estimator._config
    if config._distribute_coordinator_mode != dc.CoordinatorMode.INDEPENDENT_WORKER:
        return _TF_ESTIMATOR_TRAIN(estimator, train_distributed_fn, hooks)

    def worker_fn(strategy: tf.distribute.Strategy) -> None:
        local = copy.deepcopy(estimator)
        local._config._train_distribute = strategy
        estimator_training._init_run_config_from_worker_context(
            local._config, dc_context.get_current_worker_context())
        local._train_distribution = strategy
        local._config._distribute_coordinator_mode = None
        train_distributed_fn(local, strategy, hooks)

    return dc.run_distribute_coordinator(
        worker_fn, config.train_distribute, mode=dc.CoordinatorMode.INDEPENDENT_WORKER,
        session_config=config.session_config)


_TF_RUN_STD_SERVER = dc._run_std_server


def _run_std_server(cluster_spec: Any = None, task_type: str | None = None,
                    task_id: int | None = None, session_config: Any = None,
                    rpc_layer: str | None = None, environment: str | None = None) -> Any:
    """The coordinator's ``_run_std_server``, a ``session_config`` other than the
    running server's refused in one line first."""
    _check_server_config(session_config)
    return _TF_RUN_STD_SERVER(cluster_spec=cluster_spec, task_type=task_type,
                              task_id=task_id, session_config=session_config,
                              rpc_layer=rpc_layer, environment=environment)


def _check_server_config(session_config: Any) -> None:
    """Refuses a ``session_config`` (as the coordinator configured it for the server)
    other than the one this process's server started with: what TensorFlow's
    coordinator asserts without a word."""
    started = getattr(dc._thread_local, "session_config_str", None)
    if getattr(dc._thread_local, "server", None) is None or started == repr(session_config):
        return
    raise UsageError(
        "session_config: a cluster task's TensorFlow server starts once a process, with "
        "the first Estimator's session_config, so every Estimator the process trains on "
        "the cluster must have that one; give them all the same RunConfig session_config "
        f"(or train the other model in a process of its own). Received: session_config "
        f"{_one_line(repr(session_config))}, the server's {_one_line(started or '')}")


def _one_line(text: str, limit: int = 160) -> str:
    words = " ".join(text.split()) or "None"
    return words if len(words) <= limit else words[:limit] + "..."


def install() -> None:
    """Lets ``Estimator.train`` run on a ``TF_CONFIG`` cluster, and a later Estimator's
    other ``session_config`` end in one line (idempotent)."""
    estimator_training.estimator_train = _estimator_train
    dc._run_std_server = _run_std_server
