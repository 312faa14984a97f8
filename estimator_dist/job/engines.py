"""The same built-in run on the TF2 paths: ``python -m estimator_dist.train --engine ...``.

| engine | how it trains |
| --- | --- |
| ``estimator`` | the model_fn in a ``tf.estimator.Estimator`` (the default; ``training.run``) |
| ``keras`` | the equivalent Keras model, ``compile`` + ``fit`` under the strategy's scope |
| ``loop`` | the same Keras layers in a custom loop: ``strategy.run`` + ``strategy.reduce`` |

The TF2 engines train any built-in model of ``models.MODELS`` (its ``tf2_model``, default
params) on the built-in data, with the same global batch, seed, learning rate (Adam), steps
and strategy as the Estimator, and print the same eval metrics (``accuracy``, ``loss`` over the eval
set) and the examples/s of training, so one command compares results and speed. They
write no model dir: they exist to compare. Strategies: those of ``strategy_table`` that run
in one process (``default``, ``mirrored``), through the run's ``plan.Plan`` as for the
Estimator.
"""
from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from estimator_dist import models
from estimator_dist.conversion import keras_conversion
from estimator_dist.distribute import strategy_table
from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    import tensorflow as tf
    from estimator_dist.job.settings import RunSettings

ENGINES = ("estimator", "keras", "loop")


def _one_process(kind: strategy_table.StrategyKind) -> bool:
    """Whether the engines run under ``kind``: a tf.distribute strategy of one process."""
    return not kind.cluster and not kind.tpu


def check_settings(settings: RunSettings, engine: str) -> None:
    """Refuses the settings the TF2 engines do not express, each by name."""
    if not _one_process(settings.kind):
        names = strategy_table.names_where(_one_process)
        raise UsageError(f"strategy must be one of {', '.join(names)} with engine "
                         f"{engine!r}. Received: strategy={settings.strategy!r}")
    if settings.train_data:
        raise UsageError(f"train_data must be left out with engine {engine!r} (it trains on "
                         f"the built-in data). Received: train_data={settings.train_data!r}")
    # Settings of the Estimator's model dir would do nothing here: refused, not ignored.
    for name in ("model_dir", "export_dir"):
        if getattr(settings, name) is not None:
            raise UsageError(f"{name} must be left out with engine {engine!r} (the TF2 engines "
                             f"write no model dir or export). Received: "
                             f"{name}={getattr(settings, name)!r}")
    if settings.mixed_precision is not None:
        raise UsageError(f"mixed_precision must be none with engine {engine!r} (the Estimator "
                         f"engine computes in it). Received: "
                         f"mixed_precision={settings.mixed_precision!r}")
    expressed = models.model_of(settings.model).tf2_params
    for name in settings.params:
        if name not in expressed:
            raise UsageError(f"params must be among {', '.join(expressed)} with "
                             f"engine {engine!r}. Received: {name}={settings.params[name]!r}")


def _strategy(settings: RunSettings) -> tf.distribute.Strategy:
    """The strategy of the run's plan, as the Estimator path resolves it (one process)."""
    import tensorflow as tf  # Late: loads TensorFlow.

    from estimator_dist import plan as plan_lib  # Late: loads TensorFlow.

    plan = plan_lib.resolve(settings.kind, num_replicas=settings.num_replicas)
    return plan.config.train_distribute or tf.distribute.get_strategy()


def _keras_engine(model: Any, train: Any, evaluation: Any, *, steps: int, batch_size: int,
                  eval_steps: int) -> tuple[dict[str, float], float]:
    """Trains with ``fit``; returns (eval metrics, training seconds)."""
    import tensorflow as tf  # Late: loads TensorFlow.

    del batch_size  # fit reads the batches as the dataset makes them.
    marks = []
    clock = tf.keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: marks.append(time.monotonic()))
    model.fit(train, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[clock])
    seconds = marks[-1] - marks[0]  # After the first step, which traces the function.
    loss, accuracy = model.evaluate(evaluation, steps=eval_steps, verbose=0)
    return {"accuracy": accuracy, "loss": loss}, seconds


def _loop_engine(model: Any, train: Any, evaluation: Any, *, steps: int, batch_size: int,
                 eval_steps: int) -> tuple[dict[str, float], float]:
    """Trains with a custom loop: ``strategy.run`` per step, ``strategy.reduce`` of sums."""
    del eval_steps  # The loop reads the eval set to its end.
    import tensorflow as tf  # Late: loads TensorFlow.

    strategy, total = model.distribute_strategy, tf.distribute.ReduceOp.SUM

    def losses(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = model(x, training=True)
        return tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True), logits

    @tf.function
    def train_step(iterator: Any) -> tf.Tensor:
        def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                per_example, _ = losses(x, y)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=batch_size)
            variables = model.trainable_variables
            model.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        return strategy.reduce(total, strategy.run(step, args=next(iterator)), axis=None)

    @tf.function
    def eval_step(batch: Any) -> list[tf.Tensor]:
        def step(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
            per_example, logits = losses(x, y)
            correct = tf.equal(tf.argmax(logits, -1), tf.cast(y, tf.int64))
            return (tf.reduce_sum(per_example), tf.reduce_sum(tf.cast(correct, tf.float32)),
                    tf.cast(tf.size(y), tf.float32))

        return [strategy.reduce(total, s, axis=None) for s in strategy.run(step, args=batch)]

    iterator = iter(train)
    float(train_step(iterator))  # The first step traces the function.
    start = time.monotonic()
    for _ in range(steps - 1):
        loss = train_step(iterator)
    float(loss)  # Waits for the last step.
    seconds = time.monotonic() - start
    sums = [0.0, 0.0, 0.0]
    for batch in evaluation:
        sums = [a + float(b) for a, b in zip(sums, eval_step(batch))]
    return {"accuracy": sums[1] / sums[2], "loss": sums[0] / sums[2]}, seconds


_ENGINE_FNS = {"keras": _keras_engine, "loop": _loop_engine}


@dataclasses.dataclass(frozen=True)
class EngineResult:
    """What a TF2 engine run reports."""

    engine: str
    replicas: int
    metrics: dict[str, float]  # accuracy and loss over the eval set.
    steps: int
    batch_size: int  # Global.
    seconds: float  # Training from the end of the first step (which traces) to the last.

    @property
    def examples_per_second(self) -> float:
        return (self.steps - 1) * self.batch_size / self.seconds if self.seconds else 0.0


def run(settings: RunSettings, engine: str) -> EngineResult:
    """Trains the built-in model on the TF2 ``engine`` ("keras" or "loop"); evaluates it.

    Raises:
      UsageError: settings the engine does not express (``check_settings``).
    """
    check_settings(settings, engine)
    import tensorflow as tf  # Late: loads TensorFlow.

    from input_fns import from_arrays  # Late: loads TensorFlow.

    strategy = _strategy(settings)
    builtin, settings = models.model_of(settings.model), settings.with_model_defaults()
    params, batch_size, steps = settings.params, settings.batch_size, settings.max_steps
    tf.keras.utils.set_random_seed(settings.seed)
    train, evaluation = builtin.train_data(), builtin.eval_data()
    train_fn = from_arrays(train.features, train.labels, batch_size=batch_size,
                           seed=settings.seed)
    eval_fn = from_arrays(evaluation.features, evaluation.labels, batch_size=batch_size,
                          shuffle=False, num_epochs=1)
    with strategy.scope():
        model = keras_conversion.new_keras_model(builtin, params,
                                                 train.features["x"].shape[1:])
        model.compile(optimizer=tf.keras.optimizers.Adam(params["learning_rate"]),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    metrics, seconds = _ENGINE_FNS[engine](
        model, strategy.distribute_datasets_from_function(train_fn),
        strategy.distribute_datasets_from_function(eval_fn), steps=steps,
        batch_size=batch_size, eval_steps=len(evaluation.labels) // batch_size)
    return EngineResult(engine, strategy.num_replicas_in_sync, metrics, steps, batch_size,
                        seconds)
