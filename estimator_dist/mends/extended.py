"""Behaviour added to a strategy's ``extended`` object, where TensorFlow does the work.

The object's class becomes a subclass of a mixin and its own class. A class survives
the deep copies Estimator and the distribute coordinator make of a strategy, where an
attribute patched onto the object would not.
"""
_CLASSES = {}


def add_mixin(strategy, mixin):
    """Makes ``strategy.extended`` an instance of ``(mixin, its class)`` (once)."""
    base = type(strategy.extended)
    if issubclass(base, mixin):
        return
    if (mixin, base) not in _CLASSES:
        _CLASSES[mixin, base] = type(f"{mixin.__name__.strip('_')}{base.__name__}",
                                     (mixin, base), {})
    strategy.extended.__class__ = _CLASSES[mixin, base]
