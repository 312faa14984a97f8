"""Each training graph of a multi-worker strategy collects under instance keys that no
earlier graph of the process used (mend ``collective_instances``).

Every ``train`` call on a cluster runs through the distribute coordinator, which trains a
deep copy of the strategy configured for the task; configuring makes the copy a new
``CollectiveKeys``, so each training graph numbers its collectives from instance key 100
again, in the same group. The task's server remembers each (group, instance) key's
collective for the life of the process, with its kind, data type and shape. While every
``train`` call builds the same graph, the keys mean the same ops again. A ``train`` call
whose graph has other collectives, or the same ones in another order (another input_fn: a
finite input adds its end flags' all-reduce; deepctr trains on a TFRecord input, then on
a pandas one), gives a key another op than the one the server remembers, and its session
stops at the first collective that differs: "Shape mismatch in the collective instance
173 ... expected shape [4] but another member in the group expected shape [152]", or
"Collective instance 101 expected type 1 ... but got type 0".

``apply()`` makes every ``CollectiveKeys`` the strategy and its configured copies hold
draw instance keys from one count per (group, device) of the process: the first graph
takes TensorFlow's own keys, each later one goes on past the last key taken. Every task
builds the same graphs in the same order (each collective's keys must already agree
within a graph), so the tasks agree on the keys across graphs too.
"""
from __future__ import annotations

import threading
from typing import Any

import tensorflow as tf

from estimator_dist.mends import extended as _extended

_LOCK = threading.Lock()
# (group key, device) -> the next instance key a graph of this process may take.
_NEXT: dict[tuple[int, str], int] = {}


class _ProcessInstanceKeys(_extended.Mixin):
    """A ``CollectiveKeys`` whose instance keys continue the process's count."""

    def get_instance_key(self, group_key: int, device: str) -> int:
        taken = super().get_instance_key(group_key, device)  # TensorFlow's checks.
        with _LOCK:
            key = max(taken, _NEXT.get((group_key, device), taken))
            _NEXT[group_key, device] = key + 1
        return key


def _continue_count(keys: Any) -> None:
    _extended.mix_into(keys, _ProcessInstanceKeys)


class _ConfiguredKeysExtended(_extended.Mixin):
    """A strategy's ``extended`` whose every configured copy continues the count."""

    def _initialize_multi_worker(self, *args: Any, **kwargs: Any) -> None:
        super()._initialize_multi_worker(*args, **kwargs)
        _continue_count(self._collective_keys)


def apply(strategy: tf.distribute.Strategy) -> None:
    """Makes ``strategy`` and the copies the coordinator configures of it take instance
    keys that no earlier graph of the process took."""
    _extended.add_mixin(strategy, _ConfiguredKeysExtended)
    _continue_count(strategy.extended._collective_keys)
