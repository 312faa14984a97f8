"""The strategies by name, and what each one means for a run: the one table.

Everything that asks "which strategy?" reads a ``StrategyKind`` from here instead of
comparing names: the command line's choices, the settings check, the run plan
(``plan.py``), the strategy builders (``strategies.py``) and the TPU wiring
(``run_config.py``). Imports no TensorFlow, so the command line can list the names
before TensorFlow starts. A new strategy is one entry here plus its builder.
"""
import dataclasses

from estimator_dist.errors import entry_of


@dataclasses.dataclass(frozen=True)
class StrategyKind:
    """What a strategy means for a run.

    Attributes:
      name: the name users pass (``make_run_config(name)``, ``--strategy name``).
      cluster: its tasks and their roles come from ``TF_CONFIG`` (or another cluster
        source, see ``cluster_sources``).
      synchronous: replicas step together on one global batch split evenly among them;
        False for asynchronous workers that each step on a whole batch.
      loops: several training steps per ``Session.run`` are supported under it.
      collectives: replicas meet in collectives every step, so a lost peer is fatal
        (``PeerFailureHook`` ends the run instead of retrying forever).
      tpu: built through ``TPUEstimator`` and its own RunConfig, not a tf.distribute
        strategy; input_fns go through ``tpu_input_fn``.
    """

    name: str
    cluster: bool = False
    synchronous: bool = True
    loops: bool = True
    collectives: bool = False
    tpu: bool = False


STRATEGIES = {kind.name: kind for kind in (
    StrategyKind("default"),
    StrategyKind("mirrored"),
    StrategyKind("multi_worker", cluster=True, collectives=True),
    StrategyKind("parameter_server", cluster=True, synchronous=False, loops=False),
    StrategyKind("tpu", loops=False, tpu=True),
)}

NAMES = tuple(STRATEGIES)
CLUSTER_NAMES = tuple(name for name, kind in STRATEGIES.items() if kind.cluster)


def kind_of(name):
    """Returns the ``StrategyKind`` named ``name``.

    Raises:
      UsageError (a ValueError): an unknown name, listing the valid ones.
    """
    return entry_of(STRATEGIES, "strategy", name, listed=", ".join(map(repr, NAMES)))
