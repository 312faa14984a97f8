"""Stops a training run whose replicas or workers no longer hold the same weights.

Under "mirrored" and "multi_worker" every replica keeps its own copy of each variable,
and the strategy keeps the copies equal by applying one aggregated update to all of
them. Code that updates a copy by itself breaks that without any error: a custom
optimizer whose ``apply_gradients`` assigns the new value per variable
(``param.assign(next_param)``, as BERT's ``AdamWeightDecayOptimizer`` does), or an
``assign`` in the model_fn, updates each copy with its own replica's values. The copies
drift apart, and the checkpoint keeps only the first replica's.

Mend ``divergence_check``, applied by the "mirrored" and "multi_worker" builders, makes
the strategy add a ``DivergenceHook`` to every Estimator training graph it builds, so a
plain ``tf.estimator.Estimator(model_fn, config=make_run_config(...))`` needs no hook of
its own. When the session starts, after the first step, every
``CHECK_EVERY_STEPS`` steps and at the end (across workers: unless the input ended, when
no collective can run), the check compares the copies of every mirrored variable in one
extra ``Session.run``: the local replicas value by value, and the workers by a per-variable
checksum (sum and sum of squares in float64) gathered with one all-reduce. When any
differ, training stops with ``ReplicaDivergenceError``: one line naming the variable
and the likely cause. Per-replica (``ON_READ``) variables may differ and are skipped.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import tensorflow as tf

from estimator_dist.mends import internals

CHECK_EVERY_STEPS = 100
# The check of a graph: variable names, their spreads and scales, and where the compared
# copies live ("replicas" or "workers").
Check = Tuple[List[str], tf.Tensor, tf.Tensor, str]
# Copies updated by the same aggregated update are bit-identical; this leaves room for
# reductions that are not.
_RELATIVE_TOLERANCE = 1e-6


class ReplicaDivergenceError(RuntimeError):
    """Replicas or workers of a synchronous strategy hold different values of a variable."""


def _checked_variables() -> list[tf.Variable]:
    """The mirrored (kept-equal) variables of the graph with something to compare."""
    return [v for v in tf.compat.v1.global_variables()
            if internals.is_mirrored_variable(v)
            and (v.dtype.is_floating or v.dtype.is_integer)
            and v.shape.is_fully_defined() and v.shape.num_elements() != 0]


def _by_dtype(variables: list[tf.Variable]) -> list[list[tf.Variable]]:
    """Variables grouped by dtype, so that each group's copies concatenate into one vector."""
    groups: dict[tf.DType, list[tf.Variable]] = {}
    for variable in variables:
        groups.setdefault(variable.dtype.base_dtype, []).append(variable)
    return list(groups.values())


def _flat(strategy: tf.distribute.Strategy, variables: list[tf.Variable],
          replica: int) -> tuple[tf.Tensor, tf.Tensor]:
    """One vector of ``variables``' copies on local ``replica``, and each element's
    variable (its index in ``variables``).

    A check then costs a few ops per variable, not a dozen: on a small model the ops, not
    the arithmetic, are what a check costs.
    """
    copies = [strategy.experimental_local_results(v)[replica] for v in variables]
    with tf.device(copies[0].device):
        vector = tf.concat([tf.reshape(c.read_value(), [-1]) for c in copies], 0)
        ids = tf.repeat(tf.range(len(variables)), [v.shape.num_elements() for v in variables])
    return vector, ids


# Variables with more elements than this are compared one by one, outside the one flat
# vector: that vector's element-to-variable ids would be a constant of one int32 per
# element, which the session's graph optimizer folds and copies: peak memory that grows
# with the elements, hundreds of MiB per process for a 1e6-bucket crossed column's weights
# and optimizer slots.
_FLAT_MAX_ELEMENTS = 65536


def _split(variables: list[tf.Variable]) -> tuple[list[int], list[int]]:
    """The positions of ``variables`` checked in one flat vector, and of those checked one
    by one (above ``_FLAT_MAX_ELEMENTS``)."""
    small = [i for i, v in enumerate(variables) if v.shape.num_elements() <= _FLAT_MAX_ELEMENTS]
    large = [i for i, v in enumerate(variables) if v.shape.num_elements() > _FLAT_MAX_ELEMENTS]
    return small, large


def _in_variable_order(parts: list[tf.Tensor], small: list[int],
                       large: list[int]) -> tf.Tensor:
    """``parts`` (the small variables' rows, then each large one's) concatenated, in the
    order of the variables."""
    return tf.gather(tf.concat(parts, 0), tf.constant(np.argsort(small + large), tf.int32))


def _replica_spreads(strategy: tf.distribute.Strategy,
                     variables: list[tf.Variable]) -> tuple[tf.Tensor, tf.Tensor]:
    """Per variable: the largest difference of a local copy from the first, and a scale."""
    small, large = _split(variables)
    replicas = len(strategy.experimental_local_results(variables[0]))
    spreads, scales = [], []
    if small:
        first, ids = _flat(strategy, [variables[i] for i in small], 0)
        spread = tf.zeros([len(small)], first.dtype)
        for replica in range(1, replicas):
            other, _ = _flat(strategy, [variables[i] for i in small], replica)
            spread = tf.maximum(spread, tf.math.segment_max(tf.abs(other - first), ids))
        spreads.append(spread)
        scales.append(tf.math.segment_max(tf.abs(first), ids))
    for i in large:
        copies = [c.read_value() for c in strategy.experimental_local_results(variables[i])]
        with tf.device(copies[0].device):
            spreads.append(tf.reshape(tf.reduce_max(
                [tf.reduce_max(tf.abs(c - copies[0])) for c in copies[1:]]), [1]))
            scales.append(tf.reshape(tf.reduce_max(tf.abs(copies[0])), [1]))
    spread, scale = (_in_variable_order(parts, small, large) for parts in (spreads, scales))
    return tf.cast(spread, tf.float64), tf.cast(scale, tf.float64)


def _checksums(strategy: tf.distribute.Strategy, variables: list[tf.Variable]) -> tf.Tensor:
    """[variables, 2]: the sum and sum of squares (float64) of each variable's first local
    copy."""
    small, large = _split(variables)
    parts = []
    if small:
        vector, ids = _flat(strategy, [variables[i] for i in small], 0)
        vector = tf.cast(vector, tf.float64)
        parts.append(tf.stack([tf.math.segment_sum(vector, ids),
                               tf.math.segment_sum(vector * vector, ids)], 1))
    for i in large:
        copy = strategy.experimental_local_results(variables[i])[0]
        with tf.device(copy.device):
            values = tf.cast(copy.read_value(), tf.float64)
            parts.append(tf.stack([tf.reduce_sum(values), tf.reduce_sum(values * values)])[None])
    return _in_variable_order(parts, small, large)


def _worker_spreads(strategy: tf.distribute.Strategy,
                    variables: list[tf.Variable]) -> tuple[tf.Tensor, tf.Tensor]:
    """Per variable: the spread of a checksum across workers, and the checksums' scale.

    Each worker writes its checksums (sum and sum of squares, float64) into its own row
    of a zero table; summing the tables over the workers (one all-reduce, exact since
    the rest is zeros) gives every worker every row.
    """
    worker, workers = internals.worker_index(strategy), internals.num_workers(strategy)
    checksums = _checksums(strategy, variables)
    table = tf.pad(checksums[None], [[worker, workers - 1 - worker], [0, 0], [0, 0]])
    table = strategy.reduce(tf.distribute.ReduceOp.SUM, table, axis=None)
    spread = tf.reduce_max(tf.reduce_max(table, 0) - tf.reduce_min(table, 0), 1)
    return spread, tf.reduce_max(tf.abs(table), [0, 2])


def _check_tensors(strategy: tf.distribute.Strategy) -> Check | None:
    """(variable names, spreads, scales, place) for the graph's mirrored variables, or None.

    ``place`` is "replicas" or "workers": where the copies that are compared live.
    """
    variables = _checked_variables()
    if not variables:
        return None
    across_workers = internals.num_workers(strategy) > 1
    spreads_of = _worker_spreads if across_workers else _replica_spreads
    groups = _by_dtype(variables)
    pairs = [spreads_of(strategy, group) for group in groups]
    names = [v.name.split(":")[0] for group in groups for v in group]
    return (names, tf.concat([p[0] for p in pairs], 0), tf.concat([p[1] for p in pairs], 0),
            "workers" if across_workers else "replicas")


def _message(name: str, spread: float, step: int, place: str) -> str:
    """The one line ``ReplicaDivergenceError`` carries."""
    return (f"variable {name!r} must hold the same value on every one of the {place}, but "
            f"its copies differ by {spread:.3g} at step {step}: something updates each "
            "copy on its own, e.g. a custom optimizer whose apply_gradients assigns new "
            "values from gradients not aggregated across replicas, or an assign in the "
            "model_fn; aggregate before assigning (see docs/strategies.md, 'Replicas that "
            "drift apart').")


class DivergenceHook(tf.compat.v1.train.SessionRunHook):
    """Runs the check when the session starts, after the first step, every
    ``every_n_steps`` steps and at the end.

    The check is built in ``begin``, once the model is in the graph and outside any loop
    that runs several steps per ``Session.run``. Its first run in a session costs about
    a second (the session prepares the check's subgraph); the run at session start puts
    that into start-up, and checks that the copies start out equal.
    """

    def __init__(self, strategy: tf.distribute.Strategy,
                 every_n_steps: int = CHECK_EVERY_STEPS) -> None:
        self._strategy = strategy
        self._every_n_steps = every_n_steps
        self._check: Check | None = None
        self._steps = 0
        self._checked_at = 0
        self._in_step = False

    def begin(self) -> None:
        with self._strategy.scope():
            self._check = _check_tensors(self._strategy)

    def after_create_session(self, session: tf.compat.v1.Session,
                             coord: tf.train.Coordinator) -> None:
        del coord  # Unused.
        self._run_check(session)

    def before_run(self, run_context: tf.estimator.SessionRunContext) -> None:
        del run_context  # Unused.
        self._in_step = True

    def after_run(self, run_context: tf.estimator.SessionRunContext,
                  run_values: tf.estimator.SessionRunValues) -> None:
        del run_values  # The check reads the variables after the step, in a run of its own.
        self._in_step = False
        self._steps += 1
        if self._steps == 1 or self._steps % self._every_n_steps == 0:
            self._run_check(run_context.session)

    def end(self, session: tf.compat.v1.Session) -> None:
        # A step that never returned ended the session by the end of input: a collective
        # now would fail ("Restart your program to reset"), as would a worker's that
        # stopped at another step.
        if self._steps != self._checked_at and not (self._in_step and self._across_workers()):
            self._run_check(session)

    def _across_workers(self) -> bool:
        return self._check is not None and self._check[3] == "workers"

    def _run_check(self, session: tf.compat.v1.Session) -> None:
        self._checked_at = self._steps
        if self._check is None:
            return
        names, spreads, scales, place = self._check
        spreads, scales, step = session.run(
            [spreads, scales, tf.compat.v1.train.get_global_step()])
        excess = spreads / (_RELATIVE_TOLERANCE * np.maximum(scales, 1.0))
        worst = int(np.argmax(excess))
        if excess[worst] > 1.0:
            raise ReplicaDivergenceError(
                _message(names[worst], spreads[worst], step, place))
