"""The run's settings as one checked, immutable object.

Precedence: command-line flag -> config file -> default. Every field can live in a
JSON or YAML config file; unknown keys are refused by name with the nearest valid key.
"""
import dataclasses
import difflib
import json
import pathlib

import yaml

from estimator_dist.errors import UsageError, check_positive_int

MODELS = ("dense", "lstm")
STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """Everything one ``python -m estimator_dist.train`` run needs."""

    model: str = "dense"
    strategy: str = "default"
    num_replicas: int = None
    max_steps: int = None  # None: the model's default.
    batch_size: int = None  # None: the model's default; always the global batch.
    model_dir: str = None  # None: a new directory under ./runs.
    save_checkpoints_steps: int = None  # None: at the end and every 10 minutes.
    seed: int = 42
    eval_steps: int = None  # None: the whole eval set.
    tpu_name: str = None
    tpu_validate: bool = False
    collective_timeout: int = None
    verbose: bool = False

    def __post_init__(self):
        _check_choice("model", self.model, MODELS)
        _check_choice("strategy", self.strategy, STRATEGIES)
        for name in ("num_replicas", "max_steps", "batch_size", "save_checkpoints_steps",
                     "eval_steps", "collective_timeout"):
            check_positive_int(name, getattr(self, name), allow_none=True)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UsageError(f"seed must be a non-negative int. Received: seed={self.seed!r}")
        if self.tpu_validate and self.strategy != "tpu":
            raise UsageError("tpu_validate applies to strategy 'tpu' only. "
                             f"Received: strategy={self.strategy!r}")

    def replace(self, **changes):
        """A copy with ``changes`` applied (and checked)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, source="config"):
        """Builds settings from a mapping; unknown keys are refused by name."""
        if not isinstance(values, dict):
            raise UsageError(f"{source} must be a mapping of settings. "
                             f"Received: {type(values).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        for key in values:
            if key not in names:
                near = difflib.get_close_matches(str(key), names, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise UsageError(f"{source} keys must be settings of estimator_dist.train"
                                 f"{hint}. Received: unknown key {key!r}")
        return cls(**values)


def _check_choice(name, value, choices):
    if value not in choices:
        raise UsageError(f"{name} must be one of {', '.join(choices)}. Received: {name}={value!r}")


def load_file(path):
    """Reads a JSON or YAML settings file (safe loading) into a dict."""
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"config file must be a readable file. Received: {str(path)!r} "
                         f"({error.strerror})") from None
    try:
        values = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        first = str(error).splitlines()[0]
        raise UsageError(f"config file must be valid {'JSON' if path.suffix == '.json' else 'YAML'}. "
                         f"Received: {str(path)!r} ({first})") from None
    return {} if values is None else values
