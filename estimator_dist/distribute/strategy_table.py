"""The strategies by name, and everything each one means for a run: the one table.

Everything that asks "which strategy?" reads a ``StrategyKind`` from here instead of
comparing names: the command line's choices, the settings check, the run plan
(``plan.py``), the strategy builders (``strategies.py``) and ``make_run_config``
(``run_config.py``). A name is looked up once (``kind_of``) and the kind handed down.
Imports no TensorFlow, so the command line can list the names before TensorFlow starts:
builders are named here by their import path and loaded when a strategy is built. A new
strategy is one ``StrategyKind`` entry here plus its builder (docs/architecture.md,
"Adding a strategy"); the process-wide mends it needs follow from its facts
(``mends.catalogue``, ``Mend.needs``).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from estimator_dist.errors import entry_of


@dataclasses.dataclass(frozen=True)
class StrategyKind:
    """What a strategy means for a run.

    Attributes:
      name: the name users pass (``make_run_config(name)``, ``--strategy name``).
      builder: ``"module:function"``, the function that builds its ``StrategySetup``
        (``strategies.build`` calls it as ``function(num_replicas, options, tf_config)``);
        None for "tpu", which ``make_run_config`` wires through TPUEstimator's RunConfig.
      cluster: its tasks and their roles come from ``TF_CONFIG`` (or another cluster
        source, see ``cluster_sources``).
      synchronous: replicas step together on one global batch split evenly among them;
        False for asynchronous workers that each step on a whole batch.
      loops: several training steps per ``Session.run`` are supported under it.
      collectives: replicas meet in collectives every step, so a lost peer is fatal
        (``PeerFailureHook`` ends the run instead of retrying forever).
      mirrored_variables: each of several replicas holds its own copy of every variable
        (tf.distribute's mirrored variables), kept equal only while every update is
        all-reduced, so copies updated apart drift (``divergence_check``).
      tpu: built through ``TPUEstimator`` and its own RunConfig, not a tf.distribute
        strategy; input_fns go through ``tpu_input_fn``.
      one_replica: None where ``num_replicas`` sets the replicas; else ``num_replicas``
        must be 1 or None, and this says how to get more replicas (may be empty).
      options: the keyword options of ``strategies.build`` it takes (``collective_timeout``,
        ``rendezvous_timeout``, ...).
      run_config_args: the arguments of ``make_run_config`` only it takes.
    """

    name: str
    builder: str | None = None
    cluster: bool = False
    synchronous: bool = True
    loops: bool = True
    collectives: bool = False
    mirrored_variables: bool = False
    tpu: bool = False
    one_replica: str | None = None
    options: tuple[str, ...] = ()
    run_config_args: tuple[str, ...] = ()


_BUILDERS = "estimator_dist.distribute.strategies"

STRATEGIES = {kind.name: kind for kind in (
    StrategyKind("default", builder=f"{_BUILDERS}:_default", one_replica=""),
    StrategyKind("mirrored", builder=f"{_BUILDERS}:_mirrored", mirrored_variables=True),
    StrategyKind(
        "multi_worker", builder=f"{_BUILDERS}:_multi_worker", cluster=True, collectives=True,
        mirrored_variables=True,
        one_replica=" (one replica per worker process; add workers to TF_CONFIG instead)",
        options=("collective_timeout", "all_reduce_bytes_per_pack", "all_reduce_dtype",
                 "sparse_gradients", "rendezvous_timeout")),
    StrategyKind(
        "parameter_server", builder=f"{_BUILDERS}:_parameter_server", cluster=True,
        synchronous=False, loops=False, one_replica=" (add workers to TF_CONFIG instead)",
        options=("rendezvous_timeout",)),
    # The arguments of tf.compat.v1.estimator.tpu.RunConfig (and its resolver) it takes.
    StrategyKind("tpu", loops=False, tpu=True,
                 run_config_args=("cluster", "master", "tpu_config", "tpu_zone", "gcp_project",
                                  "iterations_per_loop")),
)}


def names_where(fact: Callable[..., bool]) -> tuple[str, ...]:
    """The names of the kinds for which ``fact(kind)`` holds, in the table's order."""
    return tuple(name for name, kind in STRATEGIES.items() if fact(kind))


NAMES = tuple(STRATEGIES)
CLUSTER_NAMES = names_where(lambda kind: kind.cluster)
# How "multi_worker" sends sparse gradients between workers (mend sparse_gradients): by
# each table's bytes, always as rows, always dense.
SPARSE_GRADIENTS = ("auto", "rows", "dense")


def kind_of(name: str) -> StrategyKind:
    """Returns the ``StrategyKind`` named ``name``.

    Raises:
      UsageError (a ValueError): an unknown name, listing the valid ones.
    """
    return entry_of(STRATEGIES, "strategy", name,
                    listed=", ".join(map(repr, STRATEGIES)))


def as_kind(strategy: StrategyKind | str) -> StrategyKind:
    """``strategy`` as a ``StrategyKind``: a kind as it is, a name looked up (``kind_of``)."""
    return strategy if isinstance(strategy, StrategyKind) else kind_of(strategy)

