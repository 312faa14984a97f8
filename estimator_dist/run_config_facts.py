"""What this package's RunConfigs carry beyond TensorFlow's own fields, declared once.

``make_run_config`` records on the RunConfig it returns (``StrategyRunConfig`` or
``TPURunConfig``, both ``RunFacts``) the training steps per ``Session.run`` and the mixed
precision; ``make_estimator``, the train job and the mends read them back here. They live
on the instance, so the deep copies of ``RunConfig.replace`` (and Estimator's) keep them;
a RunConfig built by TensorFlow itself has the defaults (``steps_per_run_of``,
``mixed_precision_of``). No TensorFlow at import: the mends, below ``distribute/``, read
them too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from estimator_dist import precision
from estimator_dist.errors import check_positive_int

if TYPE_CHECKING:
    import tensorflow as tf

DEFAULT_STEPS_PER_RUN = 1


class RunFacts:
    """The facts ``make_run_config`` adds to its RunConfig classes (a mixin), each checked
    when set."""

    _steps_per_run = DEFAULT_STEPS_PER_RUN
    _mixed_precision = None

    @property
    def steps_per_run(self) -> int:
        """Training steps per ``Session.run`` (``make_estimator`` builds a ``LoopEstimator``
        above 1); "tpu" loops through ``iterations_per_loop`` instead."""
        return self._steps_per_run

    @steps_per_run.setter
    def steps_per_run(self, value: int) -> None:
        self._steps_per_run = check_positive_int("steps_per_run", value)

    @property
    def mixed_precision(self) -> str | None:
        """None (float32), "bfloat16" or "float16" (see ``estimator_dist.precision``)."""
        return self._mixed_precision

    @mixed_precision.setter
    def mixed_precision(self, value: str | None) -> None:
        self._mixed_precision = precision.check_mixed_precision(value)


def steps_per_run_of(config: tf.estimator.RunConfig) -> int:
    """``config.steps_per_run`` for this package's RunConfigs, 1 for any other."""
    return config.steps_per_run if isinstance(config, RunFacts) else DEFAULT_STEPS_PER_RUN


def mixed_precision_of(config: tf.estimator.RunConfig) -> str | None:
    """``config.mixed_precision`` for this package's RunConfigs, None for any other."""
    return config.mixed_precision if isinstance(config, RunFacts) else None
