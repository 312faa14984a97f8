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
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable

from tensorflow.python.distribute import distribute_coordinator as dc
from tensorflow.python.distribute import distribute_coordinator_context as dc_context
from tensorflow.python.distribute import estimator_training

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


def install() -> None:
    """Lets ``Estimator.train`` run on a ``TF_CONFIG`` cluster (idempotent)."""
    estimator_training.estimator_train = _estimator_train
