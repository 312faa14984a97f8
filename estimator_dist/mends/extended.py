"""Behaviour added to a TensorFlow object by a mixin class, where TensorFlow does the work.

The object's class becomes a subclass of a mixin and its own class. A class survives
the deep copies Estimator and the distribute coordinator make of a strategy (and of a
RunConfig), where an attribute patched onto the object would not. The mends use it on a
strategy's ``extended`` object, on a strategy, on a RunConfig, an Estimator and a hook.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import tensorflow as tf

if TYPE_CHECKING:
    # To a type checker a mixin is of the TensorFlow class it is mixed into (Any here), so
    # its ``super()`` calls and that class's attributes check.
    Mixin = Any
else:
    Mixin = object

_CLASSES: dict[tuple[type, type], type] = {}


def mix_into(target: Any, mixin: type, name: str | None = None) -> None:
    """Makes ``target`` an instance of ``(mixin, its class)`` (once), a class named ``name``
    (default: the mixin's name, then the class's)."""
    base = type(target)
    if issubclass(base, mixin):
        return
    if (mixin, base) not in _CLASSES:
        name = name or f"{mixin.__name__.strip('_')}{base.__name__}"
        _CLASSES[mixin, base] = type(name, (mixin, base), {})
    target.__class__ = _CLASSES[mixin, base]


def add_mixin(strategy: tf.distribute.Strategy, mixin: type) -> None:
    """Makes ``strategy.extended`` an instance of ``(mixin, its class)`` (once)."""
    mix_into(strategy.extended, mixin)


def with_training_hook(spec: Any, hook: tf.compat.v1.train.SessionRunHook) -> Any:
    """``spec`` (what a ``call_for_each_replica`` returned) with ``hook`` added to its
    training hooks when it is a TRAIN ``EstimatorSpec``, else ``spec`` itself."""
    if not (isinstance(spec, tf.estimator.EstimatorSpec)
            and spec.mode == tf.estimator.ModeKeys.TRAIN):
        return spec
    # The grouped spec holds per-replica values that EstimatorSpec's own checks (run by
    # its _replace) refuse, so the copy is made as the tuple it is.
    fields = spec._asdict()
    fields["training_hooks"] = tuple(spec.training_hooks) + (hook,)
    return type(spec)._make(fields.values())


class _TrainingHooksExtended(Mixin):
    """Adds a hook of each of ``self.estimator_dist_hook_makers`` to the training spec of
    each replica."""

    def call_for_each_replica(self, fn: Callable[..., Any], args: tuple[Any, ...] = (),
                              kwargs: dict[str, Any] | None = None) -> Any:
        result = super().call_for_each_replica(fn, args, kwargs)
        for make_hook in self.estimator_dist_hook_makers:
            result = with_training_hook(result, make_hook())
        return result


def add_training_hook(strategy: tf.distribute.Strategy,
                      make_hook: Callable[[], tf.compat.v1.train.SessionRunHook]) -> None:
    """Makes ``strategy`` add ``make_hook()`` to every Estimator training spec it builds.
    ``make_hook`` survives the deep copies of the strategy: it must hold no TensorFlow
    object (a function or a ``functools.partial`` of plain values)."""
    mix_into(strategy.extended, _TrainingHooksExtended)
    makers = getattr(strategy.extended, "estimator_dist_hook_makers", ())
    strategy.extended.estimator_dist_hook_makers = (*makers, make_hook)
