"""Reads of TensorFlow's private modules and members that change nothing.

What the package needs to know and TF 2.15 keeps private: the distribute coordinator's
worker context, Slurm's host-list syntax, which variables are mirrored, where a worker
stands in a multi-worker strategy, and which cross-device ops a strategy reduces with
(the benchmarks report it). Each is read here and nowhere else, as is the coordination
service's barrier (a wait that changes nothing) and eager execution for a block of code
in a program that turned it off.
"""
from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, Any, ContextManager

import tensorflow as tf
from tensorflow.python.distribute import distribute_coordinator_context
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.distribute import values as values_lib
from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver
from tensorflow.python.eager import context

if TYPE_CHECKING:
    import types


def eager_mode() -> ContextManager[None]:
    """Eager execution for the block under it (this thread), also where the program turned
    it off (``tf.compat.v1.disable_v2_behavior()``); TensorFlow's own ``eager_mode``."""
    return context.eager_mode()


def current_worker_context() -> Any:
    """The distribute coordinator's context of this worker, or None outside one."""
    return distribute_coordinator_context.get_current_worker_context()


def expand_hostlist(nodes: str) -> list[str]:
    """Slurm's ``node[01-04]`` as host names (ValueError, IndexError on bad syntax)."""
    return slurm_cluster_resolver.expand_hostlist(nodes)


def expand_tasks_per_node(tasks: str) -> list[int]:
    """Slurm's ``2(x3),1`` as task counts per node (ValueError on bad syntax)."""
    return slurm_cluster_resolver.expand_tasks_per_node(tasks)


def is_mirrored_variable(variable: Any) -> bool:
    """Whether ``variable`` is a strategy's mirrored (kept-equal) variable."""
    return isinstance(variable, values_lib.MirroredVariable)


def num_workers(strategy: tf.distribute.Strategy) -> int:
    """How many workers ``strategy`` spans (1 for a strategy of one process)."""
    return getattr(strategy.extended, "_num_workers", 1)


def worker_index(strategy: tf.distribute.Strategy) -> int:
    """This worker's index among ``strategy``'s workers (a multi-worker strategy)."""
    extended = strategy.extended
    return multi_worker_util.id_in_cluster(extended._cluster_spec, extended._task_type,
                                           extended._task_id)


def cross_device_ops(strategy: tf.distribute.Strategy) -> Any:
    """The ``tf.distribute.CrossDeviceOps`` that reduces ``strategy``'s replicas: the one
    it was given, else the one it chose for its devices."""
    extended = strategy.extended
    return extended._cross_device_ops or extended._inferred_cross_device_ops


def in_multi_worker_mode(strategy: tf.distribute.Strategy) -> bool:
    """Whether ``strategy`` spans several workers."""
    return strategy.extended._in_multi_worker_mode()


def collectives_configurable() -> bool:
    """Whether TensorFlow's collective ops can still be configured in this process.

    In TF2 behaviour ``MultiWorkerMirroredStrategy`` configures them in eager mode, which
    TensorFlow allows only before its runtime starts (a late call raises "Collective ops
    must be configured at program startup"); in graph mode the session configures them.
    """
    eager = context.context()
    return not (tf.compat.v1.executing_eagerly_outside_functions() and eager._initialized
                and eager._collective_leader is None)


def collectives_reconfigured() -> bool:
    """Whether a ``MultiWorkerMirroredStrategy`` built now configures collective ops
    afresh with the coordination service: TF2 behaviour (eager outside functions), where
    each one re-creates this task's collective executors. In graph mode the first
    session's server keeps them."""
    eager = context.context()
    return tf.compat.v1.executing_eagerly_outside_functions() and (
        eager.coordination_service is not None)


def wait_at_barrier(barrier_id: str, timeout_seconds: float) -> None:
    """Blocks until every chief and worker of the coordination service reaches
    ``barrier_id``; raises ``tf.errors.OpError`` on the timeout or a lost task."""
    context.context().wait_at_barrier(barrier_id, int(timeout_seconds * 1000))


_ESTIMATOR_FILE = os.path.join("estimator", "estimator.py")
_TRAINING_LOOPS = ("_train_with_estimator_spec", "_train_with_estimator_spec_distributed")


def _training_loop(frame: types.FrameType | None) -> types.FrameType | None:
    """The frame of an Estimator training loop on ``frame``'s stack, else None."""
    while frame is not None:
        code = frame.f_code
        if code.co_name in _TRAINING_LOOPS and code.co_filename.endswith(_ESTIMATOR_FILE):
            return frame
        frame = frame.f_back
    return None


def _model_dir(loop: types.FrameType) -> str | None:
    return getattr(loop.f_locals.get("self"), "model_dir", None)


def _thread_frames() -> dict[int, types.FrameType]:
    """Each thread's current frame (``sys._current_frames``), with automatic garbage
    collection held off meanwhile. On Python 3.11 and older a collection that starts inside
    ``sys._current_frames`` (it allocates while it holds the interpreter's lock on its
    threads) can free an object whose finalizer waits for that lock (a ``tf.Graph``'s
    does): the process hangs for good, every thread with it (CPython issue 106883, fixed
    in 3.12)."""
    if not gc.isenabled():
        return sys._current_frames()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        gc.enable()


def estimator_training() -> tuple[int, str | None] | None:
    """(thread ident, model dir) of a thread inside an Estimator's training loop (session
    creation, steps, hooks, the session's close), else None."""
    for ident, frame in _thread_frames().items():
        loop = _training_loop(frame)
        if loop is not None:
            return ident, _model_dir(loop)
    return None


def training_model_dir(ident: int) -> str | None:
    """The model dir of the Estimator training loop thread ``ident`` is in (session
    creation, steps, hooks, the session's close), else None (evaluating, predicting,
    or outside Estimator)."""
    loop = _training_loop(_thread_frames().get(ident))
    return None if loop is None else _model_dir(loop)


def canned_estimator_arguments(estimator: Any) -> dict[str, Any]:
    """What a canned Estimator (``DNNClassifier``, ``LinearRegressor``, ...) hands its
    model_fn: the names its ``_model_fn`` closes over (``head``, ``feature_columns``,
    ``hidden_units``, ...), with ``label_vocabulary`` read from the head; the object keeps
    them nowhere public."""
    import inspect

    model_fn = estimator._model_fn
    arguments = dict(inspect.getclosurevars(model_fn).nonlocals)
    head = arguments.get("head")
    arguments["label_vocabulary"] = getattr(head, "_label_vocabulary", None)
    return arguments


def shared_embedding_name(column: Any) -> str:
    """The name of the table a shared embedding column (``tf.feature_column.shared_embeddings``
    or V1's ``shared_embedding_columns``) reads: its creator's, or V1's collection name."""
    creator = getattr(column, "shared_embedding_column_creator", None)
    if creator is not None:
        return str(creator._name)
    return str(column.shared_embedding_collection_name)
