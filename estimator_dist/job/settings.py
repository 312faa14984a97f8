"""The run's settings as one checked, immutable object.

Precedence: command-line flag -> config file -> the run recorded in the model dir ->
default. Every field can live in a JSON or YAML config file; unknown keys are refused by
name with the nearest valid key.
"""
import dataclasses
import functools
import math

from estimator_dist import models, precision
from estimator_dist.distribute import strategy_table
from estimator_dist.errors import UsageError, check_positive_int, nearest_hint

_POSITIVE_INTS = ("num_replicas", "max_steps", "batch_size", "save_checkpoints_steps",
                  "eval_steps", "collective_timeout", "rendezvous_timeout", "steps_per_run")
_OPTIONAL_STRS = ("model_dir", "tpu_name", "export_dir")
_BOOLS = ("tpu_validate", "export", "verbose")
# Upper bounds, each named in its error and in the flag's --help: a global step far past
# any real run, more replicas than one machine holds, more evaluations than a run can use,
# a day of waiting, and what TensorFlow and numpy take as a seed.
MAX_STEPS = 2**31 - 1
MAX_REPLICAS = 64
MAX_CHECKPOINTS = 10_000  # max_steps / save_checkpoints_steps: one evaluation each.
MAXIMA = {
    "max_steps": MAX_STEPS,
    "num_replicas": MAX_REPLICAS,
    "batch_size": 2**20,
    "save_checkpoints_steps": MAX_STEPS,
    "eval_steps": MAX_STEPS,
    "collective_timeout": 86_400,
    "rendezvous_timeout": 86_400,
    "steps_per_run": 10_000,
    "seed": 2**31 - 1,
}
# Settings that do something only in one mode: name -> (the mode's setting, the value it
# needs, whether the settings are in that mode).
_MODE_SETTINGS = {
    "tpu_name": ("strategy", "tpu", lambda settings: settings.kind.tpu),
    "export_dir": ("export", True, lambda settings: settings.export),
}


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """Everything one ``python -m estimator_dist.train`` run needs."""

    model: str = "dense"
    params: dict = dataclasses.field(default_factory=dict)  # Overrides of the model's params.
    strategy: str = "default"
    num_replicas: int = None
    max_steps: int = None  # None: the model's default.
    batch_size: int = None  # None: the model's default; always the global batch.
    train_data: list = None  # CSV/TFRecord paths or globs; None: the built-in data.
    eval_data: list = None  # None: train_data's files (or the built-in eval data).
    model_dir: str = None  # None: a new directory under ./runs.
    save_checkpoints_steps: int = None  # None: at the end and every 10 minutes.
    seed: int = 42
    eval_steps: int = None  # None: the whole eval set.
    tpu_name: str = None
    tpu_validate: bool = False
    collective_timeout: int = None
    rendezvous_timeout: int = None  # None: rendezvous.DEFAULT_TIMEOUT_SECONDS.
    steps_per_run: int = None  # None: DEFAULT_STEPS_PER_RUN where it applies, else 1.
    mixed_precision: str = None  # None: float32; "bfloat16" or "float16".
    export: bool = True
    export_dir: str = None  # None: MODEL_DIR/export.
    verbose: bool = False

    def __post_init__(self):
        models.model_of(self.model)
        _check_choice("strategy", self.strategy, strategy_table.NAMES)
        precision.check_mixed_precision(self.mixed_precision)
        for name in _POSITIVE_INTS:
            check_positive_int(name, getattr(self, name), allow_none=True)
        for name in _OPTIONAL_STRS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise UsageError(f"{name} must be a non-empty string. Received: {name}={value!r}")
        for name in _BOOLS:
            if not isinstance(getattr(self, name), bool):
                raise UsageError(f"{name} must be true or false. "
                                 f"Received: {name}={getattr(self, name)!r}")
        for name in ("train_data", "eval_data"):
            _check_paths(name, getattr(self, name))
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
    def kind(self):
        """The ``strategy_table.StrategyKind`` of ``strategy``, looked up once per settings."""
        return strategy_table.kind_of(self.strategy)

    def with_model_defaults(self, **changes):
        """A copy with ``changes`` applied and the built-in model's own params, batch size
        and max steps where these settings leave them unset."""
        model = models.model_of(self.model)
        return self.replace(**{"params": {**model.params, **self.params},
                               "batch_size": self.batch_size or model.batch_size,
                               "max_steps": self.max_steps or model.max_steps, **changes})

    def replace(self, **changes):
        """A copy with ``changes`` applied (and checked)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, source="config"):
        """Builds settings from a mapping; unknown keys are refused by name."""
        check_keys(values, source)
        return cls(**values)


def check_keys(values, source):
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


def merge(*layers):
    """Merges mappings of settings, later layers winning; ``params`` merge key by key."""
    merged = {}
    for layer in layers:
        for key, value in layer.items():
            if key == "params" and isinstance(value, dict):
                merged[key] = {**merged.get(key, {}), **value}
            else:
                merged[key] = value
    return merged


def _check_mode_settings(settings):
    """Refuses a setting that does nothing in the chosen mode, rather than ignoring it."""
    for name, (mode, wanted, in_mode) in _MODE_SETTINGS.items():
        value, chosen = getattr(settings, name), getattr(settings, mode)
        if value is not None and not in_mode(settings):
            raise UsageError(f"{name} applies to {mode}={wanted!r} only. Received: "
                             f"{name}={value!r} with {mode}={chosen!r}")


def _check_at_most(name, value, limit):
    if value is not None and value > limit:
        raise UsageError(f"{name} must be at most {limit:,}. Received: {name}={value}")


def _check_bounds(settings):
    for name, limit in MAXIMA.items():
        _check_at_most(name, getattr(settings, name), limit)
    every = settings.save_checkpoints_steps
    if every and settings.max_steps and settings.max_steps // every > MAX_CHECKPOINTS:
        raise UsageError(
            f"save_checkpoints_steps must leave at most {MAX_CHECKPOINTS:,} checkpoints (each "
            f"is evaluated) up to max_steps={settings.max_steps}, so at least "
            f"{-(-settings.max_steps // MAX_CHECKPOINTS)}. "
            f"Received: save_checkpoints_steps={every}")


def _check_finite_params(params):
    """Model params that are numbers must be finite (JSON lets NaN and Infinity through)."""
    if not isinstance(params, dict):
        return
    for name, value in params.items():
        numbers = value if isinstance(value, list) else [value]
        if any(isinstance(v, float) and not math.isfinite(v) for v in numbers):
            raise UsageError(f"params.{name} must be finite numbers. "
                             f"Received: params.{name}={value!r}")


def _check_paths(name, value):
    if value is None:
        return
    if (not isinstance(value, list) or not value
            or not all(isinstance(p, str) and p for p in value)):
        raise UsageError(f"{name} must be a non-empty list of file paths or globs. "
                         f"Received: {name}={value!r}")


def _check_choice(name, value, choices):
    if value not in choices:
        raise UsageError(f"{name} must be one of {', '.join(choices)}. Received: {name}={value!r}")
