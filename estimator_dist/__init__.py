"""estimator-dist: run tf.estimator code under MirroredStrategy, multi-worker and TPU.

Drop-in use::

    import estimator_dist
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir="/tmp/m")
    estimator = tf.estimator.Estimator(model_fn, config=config)

On TensorFlow 2.16 and later, importing ``estimator_dist`` gives ``tf.estimator`` and
``tf.compat.v1.estimator`` back (tensorflow-estimator 2.15.0, unmodified), with
``tf.compat.v1.layers`` and ``tf.compat.v1.nn.rnn_cell`` from tf-keras: at once when
TensorFlow is imported already, else as soon as it is (docs/install.md).

Names are loaded on first use, so ``python -m estimator_dist.train`` can quiet
TensorFlow's logging before TensorFlow is imported.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from estimator_dist import mends as _mends

__version__ = "0.1.0"

_EXPORTS = {
    "make_run_config": "estimator_dist.distribute.run_config",
    "TPURunConfig": "estimator_dist.distribute.run_config",
    "make_estimator": "estimator_dist.estimator",
    "LoopEstimator": "estimator_dist.estimator",
    "tpu_input_fn": "estimator_dist.estimator",
    "setup_cpu_replicas": "estimator_dist.distribute.strategies",
    "GlobalBatchWarning": "estimator_dist.distribute.input_checks",
    "UsageError": "estimator_dist.errors",
    "TaskEnd": "estimator_dist.errors",
    "parse_tf_config": "estimator_dist.distribute.cluster",
    "resolve_cluster": "estimator_dist.distribute.cluster_sources",
    "RendezvousError": "estimator_dist.distribute.rendezvous",
    "PeerFailureHook": "estimator_dist.hooks.peer_failure",
    "PeerLostError": "estimator_dist.hooks.peer_failure",
    "PreemptionHook": "estimator_dist.hooks.preemption",
    "Preempted": "estimator_dist.hooks.preemption",
    "ReplicaDivergenceError": "estimator_dist.hooks.divergence",
    "to_keras": "estimator_dist.conversion.keras_conversion",
    "load_mapping": "estimator_dist.conversion.checkpoint_mapping",
    "convert_checkpoint": "estimator_dist.conversion.checkpoint_mapping",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:  # The names _EXPORTS loads lazily, spelled out for IDEs and type checkers.
    from estimator_dist.conversion.checkpoint_mapping import convert_checkpoint, load_mapping
    from estimator_dist.conversion.keras_conversion import to_keras
    from estimator_dist.distribute.cluster import parse_tf_config
    from estimator_dist.distribute.cluster_sources import resolve_cluster
    from estimator_dist.distribute.input_checks import GlobalBatchWarning
    from estimator_dist.distribute.rendezvous import RendezvousError
    from estimator_dist.distribute.run_config import TPURunConfig, make_run_config
    from estimator_dist.distribute.strategies import setup_cpu_replicas
    from estimator_dist.errors import TaskEnd, UsageError
    from estimator_dist.estimator import LoopEstimator, make_estimator, tpu_input_fn
    from estimator_dist.hooks.divergence import ReplicaDivergenceError
    from estimator_dist.hooks.peer_failure import PeerFailureHook, PeerLostError
    from estimator_dist.hooks.preemption import Preempted, PreemptionHook


def _kept_tpu_estimator(*args: Any, **kwargs: Any) -> Any:
    """``estimator.kept_tpu_estimator``, imported on first use (a user may build a
    ``TPUEstimator`` having imported only ``make_run_config``): the package hands it to the
    mend, which lives below the Estimator builder."""
    from estimator_dist import estimator  # Late: loads TensorFlow.

    return estimator.kept_tpu_estimator(*args, **kwargs)


_mends.provide("tpu_estimator_kept", build=_kept_tpu_estimator)
_mends.install_on_import()


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'estimator_dist' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
