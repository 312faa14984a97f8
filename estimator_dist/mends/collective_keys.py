"""Each multi-worker strategy of a process collects under keys of its own (mend
``collective_keys``).

A ``MultiWorkerMirroredStrategy`` numbers its collective ops with keys that start at the
same numbers in every strategy object: group key 1, instance keys from 100. In graph
mode (TF1 behaviour) the task's server keeps its collective executors for the life of
the process, and they remember each (group, instance) key's kind and data type. So the
second Estimator a process builds with a config of its own (a second
``make_run_config``: two models trained one after the other, a sweep over settings)
reuses the first one's keys for other ops, and its first step fails with
"Collective instance 113 expected type 0 and data_type 1 but got type 1".

TensorFlow offsets the group keys of a strategy by its class's ``_collective_key_base``
(its own tests give each strategy a base of its own): here the n-th multi-worker
strategy built in the process starts at ``n * KEYS_PER_STRATEGY``. Every task of a
cluster builds its strategies in the same order (the rendezvous counts them), so the
tasks agree on the keys. The first strategy keeps base 0, TensorFlow's own keys.
"""
from __future__ import annotations

import itertools
import threading

# Group keys each strategy may use; a strategy uses one per set of devices it collects
# over (one or two). int32 keys leave room for 214,748 strategies in a process.
KEYS_PER_STRATEGY = 10_000

_BUILT = itertools.count()
_LOCK = threading.Lock()


def apply(strategy_class: type) -> None:
    """Gives the next strategy of ``strategy_class`` built in this process group keys
    that no strategy built before it used."""
    with _LOCK:
        setattr(strategy_class, "_collective_key_base", next(_BUILT) * KEYS_PER_STRATEGY)
