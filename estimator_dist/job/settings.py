"""The run's settings as one checked, immutable object, and their one schema.

Each field of ``RunSettings`` declares all there is to know about it (``_setting``): its
default, the rule its value must follow, its upper bound, and how ``run.json`` keeps it
(a ``run_record`` role). Precedence: command-line flag -> config file -> the run recorded
in the model dir -> default. Every field can live in a JSON or YAML config file; unknown
keys are refused by name with the nearest valid key.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Mapping, Sequence

from estimator_dist import models, precision, run_record
from estimator_dist.distribute import strategy_table
from estimator_dist.errors import UsageError, check_positive_int, nearest_hint

# Upper bounds, each named in its error and in the flag's --help: a global step far past
# any real run, more replicas than one machine holds, more evaluations than a run can use,
# a day of waiting, and what TensorFlow and numpy take as a seed.
MAX_STEPS = 2**31 - 1
MAX_REPLICAS = 64
MAX_CHECKPOINTS = 10_000  # max_steps / save_checkpoints_steps: one evaluation each.
_DAY_SECONDS = 86_400


def _check_optional_str(name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise UsageError(f"{name} must be a non-empty string. Received: {name}={value!r}")


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be true or false. Received: {name}={value!r}")


def _check_paths(name: str, value: Any) -> None:
    if value is None:
        return
    if (not isinstance(value, list) or not value
            or not all(isinstance(p, str) and p for p in value)):
        raise UsageError(f"{name} must be a non-empty list of file paths or globs. "
                         f"Received: {name}={value!r}")


_POSITIVE_INT = functools.partial(check_positive_int, allow_none=True)
# The rules a setting's value may follow (besides those __post_init__ spells out), each a
# check(name, value), run in this order.
_RULES = (_POSITIVE_INT, _check_optional_str, _check_bool, _check_paths)


def _setting(default: Any = None, *, rule: Callable[[str, Any], Any] | None = None,
             at_most: int | None = None, record: str = run_record.LOCAL,
             default_factory: Callable[[], Any] | None = None,
             only_if: tuple[str, Any, Callable[[RunSettings], bool]] | None = None) -> Any:
    """A ``RunSettings`` field with its schema in the field's metadata.

    ``rule``: one of ``_RULES``; ``at_most``: its upper bound; ``record``: how run.json
    keeps it (one of ``run_record.ROLES``); ``only_if``: (the mode's setting, the value it
    needs, whether the settings are in that mode) for a setting that does something only
    in one mode.
    """
    metadata = {"rule": rule, "at_most": at_most, run_record.ROLE: record, "only_if": only_if}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """Everything one ``python -m estimator_dist.train`` run needs."""

    # max_steps, batch_size and model_dir are typed as the job reads them: set, once
    # with_model_defaults has filled them in (None before, for the model's own).
    model: str = _setting("dense", record=run_record.IDENTITY)
    # Overrides of the model's params.
    params: dict[str, Any] = _setting(default_factory=dict, record=run_record.IDENTITY)
    strategy: str = _setting("default")
    num_replicas: int | None = _setting(rule=_POSITIVE_INT, at_most=MAX_REPLICAS)
    # None: the model's default.
    max_steps: int = _setting(rule=_POSITIVE_INT, at_most=MAX_STEPS, record=run_record.CARRIED)
    # None: the model's default; always the global batch.
    batch_size: int = _setting(rule=_POSITIVE_INT, at_most=2**20, record=run_record.CARRIED)
    # CSV/TFRecord paths or globs; None: the built-in data.
    train_data: list[str] | None = _setting(rule=_check_paths, record=run_record.CARRIED)
    # None: train_data's files (or the built-in eval data).
    eval_data: list[str] | None = _setting(rule=_check_paths, record=run_record.CARRIED)
    # None: a new directory under ./runs.
    model_dir: str = _setting(rule=_check_optional_str, record=run_record.NOT_RECORDED)
    # None: at the end and every 10 minutes.
    save_checkpoints_steps: int | None = _setting(rule=_POSITIVE_INT, at_most=MAX_STEPS,
                                                  record=run_record.CARRIED)
    seed: int = _setting(42, at_most=2**31 - 1, record=run_record.CARRIED)
    # None: the whole eval set.
    eval_steps: int | None = _setting(rule=_POSITIVE_INT, at_most=MAX_STEPS,
                                      record=run_record.CARRIED)
    tpu_name: str | None = _setting(rule=_check_optional_str,
                                    only_if=("strategy", "tpu", lambda settings: settings.kind.tpu))
    tpu_validate: bool = _setting(False, rule=_check_bool)
    collective_timeout: int | None = _setting(rule=_POSITIVE_INT, at_most=_DAY_SECONDS)
    # None: rendezvous.DEFAULT_TIMEOUT_SECONDS.
    rendezvous_timeout: int | None = _setting(rule=_POSITIVE_INT, at_most=_DAY_SECONDS)
    # None: DEFAULT_STEPS_PER_RUN where it applies, else 1.
    steps_per_run: int | None = _setting(rule=_POSITIVE_INT, at_most=10_000)
    mixed_precision: str | None = _setting()  # None: float32; "bfloat16" or "float16".
    # None: "auto" (strategy_table.SPARSE_GRADIENTS).
    sparse_gradients: str | None = _setting(
        only_if=("strategy", "multi_worker", lambda settings: settings.kind.collectives))
    export: bool = _setting(True, rule=_check_bool, record=run_record.CARRIED)
    # None: MODEL_DIR/export. Not carried: a resume exports where a fresh run would.
    export_dir: str | None = _setting(rule=_check_optional_str, record=run_record.LOCAL,
                                      only_if=("export", True, lambda settings: settings.export))
    verbose: bool = _setting(False, rule=_check_bool, record=run_record.NOT_RECORDED)

    def __post_init__(self) -> None:
        models.model_of(self.model)
        _check_choice("strategy", self.strategy, strategy_table.NAMES)
        precision.check_mixed_precision(self.mixed_precision)
        if self.sparse_gradients is not None:
            _check_choice("sparse_gradients", self.sparse_gradients,
                          strategy_table.SPARSE_GRADIENTS)
        for rule in _RULES:
            for field in dataclasses.fields(self):
                if field.metadata["rule"] is rule:
                    rule(field.name, getattr(self, field.name))
        if self.eval_data and not self.train_data:
            raise UsageError("eval_data needs train_data (the built-in data has its own eval "
                             f"set). Received: eval_data={self.eval_data!r}")
        if not isinstance(self.params, dict) or not all(isinstance(k, str) for k in self.params):
            raise UsageError("params must be a mapping of parameter names to values. "
                             f"Received: params={self.params!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UsageError(f"seed must be a non-negative int. Received: seed={self.seed!r}")
        if self.tpu_validate and not self.kind.tpu:
            raise UsageError("tpu_validate applies to strategy 'tpu' only. "
                             f"Received: strategy={self.strategy!r}")
        _check_mode_settings(self)
        _check_bounds(self)
        _check_finite_params(self.params)

    @functools.cached_property
    def kind(self) -> strategy_table.StrategyKind:
        """The ``strategy_table.StrategyKind`` of ``strategy``, looked up once per settings."""
        return strategy_table.kind_of(self.strategy)

    def with_model_defaults(self, **changes: Any) -> RunSettings:
        """A copy with ``changes`` applied and the built-in model's own params, batch size
        and max steps where these settings leave them unset."""
        model = models.model_of(self.model)
        return self.replace(**{"params": {**model.params, **self.params},
                               "batch_size": self.batch_size or model.batch_size,
                               "max_steps": self.max_steps or model.max_steps, **changes})

    def replace(self, **changes: Any) -> RunSettings:
        """A copy with ``changes`` applied (and checked)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Any, source: str = "config") -> RunSettings:
        """Builds settings from a mapping; unknown keys are refused by name."""
        check_keys(values, source)
        return cls(**values)


def check_keys(values: Any, source: str) -> None:
    """Raises unless ``values`` is a mapping whose keys are all ``RunSettings`` fields."""
    if not isinstance(values, dict):
        raise UsageError(f"{source} must be a mapping of settings. "
                         f"Received: {type(values).__name__}")
    names = [f.name for f in dataclasses.fields(RunSettings)]
    for key in values:
        if key not in names:
            raise UsageError(f"{source} keys must be settings of estimator_dist.train"
                             f"{nearest_hint(str(key).replace('-', '_'), names)}. "
                             f"Received: unknown key {key!r}")


def merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Merges mappings of settings, later layers winning; ``params`` merge key by key."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if key == "params" and isinstance(value, dict):
                merged[key] = {**merged.get(key, {}), **value}
            else:
                merged[key] = value
    return merged


def _check_mode_settings(settings: RunSettings) -> None:
    """Refuses a setting that does nothing in the chosen mode, rather than ignoring it."""
    for field in dataclasses.fields(settings):
        if field.metadata["only_if"] is None or getattr(settings, field.name) is None:
            continue
        mode, wanted, in_mode = field.metadata["only_if"]
        if not in_mode(settings):
            raise UsageError(f"{field.name} applies to {mode}={wanted!r} only. Received: "
                             f"{field.name}={getattr(settings, field.name)!r} with "
                             f"{mode}={getattr(settings, mode)!r}")


def _check_at_most(name: str, value: int | None, limit: int) -> None:
    if value is not None and value > limit:
        raise UsageError(f"{name} must be at most {limit:,}. Received: {name}={value}")


def _check_bounds(settings: RunSettings) -> None:
    for name, limit in MAXIMA.items():
        _check_at_most(name, getattr(settings, name), limit)
    every = settings.save_checkpoints_steps
    if every and settings.max_steps and settings.max_steps // every > MAX_CHECKPOINTS:
        raise UsageError(
            f"save_checkpoints_steps must leave at most {MAX_CHECKPOINTS:,} checkpoints (each "
            f"is evaluated) up to max_steps={settings.max_steps}, so at least "
            f"{-(-settings.max_steps // MAX_CHECKPOINTS)}. "
            f"Received: save_checkpoints_steps={every}")


def _check_finite_params(params: Any) -> None:
    """Model params that are numbers must be finite (JSON lets NaN and Infinity through)."""
    if not isinstance(params, dict):
        return
    for name, value in params.items():
        numbers = value if isinstance(value, list) else [value]
        if any(isinstance(v, float) and not math.isfinite(v) for v in numbers):
            raise UsageError(f"params.{name} must be finite numbers. "
                             f"Received: params.{name}={value!r}")


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise UsageError(f"{name} must be one of {', '.join(choices)}. Received: {name}={value!r}")


# Each numeric setting's upper bound, by name (the flags' --help states them).
MAXIMA = {field.name: field.metadata["at_most"] for field in dataclasses.fields(RunSettings)
          if field.metadata["at_most"] is not None}
