"""One validation table for the params of every model_fn.

A model_fn declares its params as a dict from name to ``Param(rule, default)``;
``resolve`` checks the params it receives against that table and fills in defaults.
Every error names the param, the rule and the value received, e.g.
``num_units must be a positive int. Received: num_units=0``.
"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Callable, Iterable, Mapping

REQUIRED = object()

# Keys TPUEstimator adds to params before it calls a model_fn.
TPU_ESTIMATOR_KEYS = ("batch_size", "use_tpu", "context")


@dataclasses.dataclass(frozen=True)
class Rule:
    """A check on one value and the words that describe it in errors."""

    description: str
    check: Callable[[Any], bool]


@dataclasses.dataclass(frozen=True)
class Param:
    """A param's rule and its default (``REQUIRED`` when it has none)."""

    rule: Rule
    default: Any = REQUIRED


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


POSITIVE_INT = Rule("a positive int", lambda v: _is_int(v) and v > 0)
CLASS_COUNT = Rule("an int >= 2", lambda v: _is_int(v) and v >= 2)
POSITIVE_NUMBER = Rule("a positive number", lambda v: _is_number(v) and v > 0)
DROPOUT_RATE = Rule("a number in [0, 1)", lambda v: _is_number(v) and 0 <= v < 1)
BOOL = Rule("a bool", lambda v: isinstance(v, bool))
UNITS_LIST = Rule("a list of positive ints",
                  lambda v: isinstance(v, (list, tuple)) and all(POSITIVE_INT.check(u) for u in v))


def optional(rule: Rule) -> Rule:
    """``rule`` or None."""
    return Rule(f"None or {rule.description}", lambda v: v is None or rule.check(v))


def one_of(names: Iterable[str]) -> Rule:
    """One of ``names`` (strings)."""
    listed = ", ".join(repr(n) for n in sorted(names))
    return Rule(f"one of {listed}", lambda v: isinstance(v, str) and v in names)


def error(name: str, rule_text: str, value: Any) -> ValueError:
    """The ValueError for ``name`` breaking ``rule_text`` with ``value``."""
    return ValueError(f"{name} must be {rule_text}. Received: {name}={value!r}")


def resolve(params: Mapping[str, Any] | None, table: Mapping[str, Param]) -> dict[str, Any]:
    """Returns ``params`` checked against ``table``, with defaults filled in.

    Keys TPUEstimator adds (``batch_size``, ``use_tpu``, ``context``) pass through.

    Raises:
      ValueError: a param breaks its rule, a required param is missing, or a key is
        not in the table.
    """
    params = dict(params or {})
    unknown = sorted(set(params) - set(table) - set(TPU_ESTIMATOR_KEYS))
    if unknown:
        raise ValueError(f"params must be among {', '.join(sorted(table))}. "
                         f"Received: unknown params {', '.join(unknown)}")
    resolved = {key: params[key] for key in TPU_ESTIMATOR_KEYS if key in params}
    for name, param in table.items():
        if name not in params and param.default is REQUIRED:
            raise ValueError(f"{name} must be {param.rule.description}. "
                             f"Received: no {name} in params")
        value = params.get(name, param.default)
        if not param.rule.check(value):
            raise error(name, param.rule.description, value)
        resolved[name] = value
    return resolved
