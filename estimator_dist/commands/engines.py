"""The same built-in run on the TF2 paths: ``python -m estimator_dist.train --engine ...``.

| engine | how it trains |
| --- | --- |
| ``estimator`` | the model_fn in a ``tf.estimator.Estimator`` (the default; ``training.run``) |
| ``keras`` | the equivalent Keras model, ``compile`` + ``fit`` under the strategy's scope |
| ``loop`` | the same Keras layers in a custom loop: ``strategy.run`` + ``strategy.reduce`` |

The TF2 engines train the built-in model (dense or lstm, their default params) on the
built-in data, with the same global batch, seed, learning rate (Adam), steps and strategy
as the Estimator, and print the same eval metrics (``accuracy``, ``loss`` over the eval
set) and the examples/s of training, so one command compares results and speed. They
write no model dir: they exist to compare. Strategies: ``default`` and ``mirrored``
(over logical CPU devices through ``ReductionToOneDevice``, as the Estimator path).
"""
import dataclasses
import time

from estimator_dist.errors import UsageError

ENGINES = ("estimator", "keras", "loop")
_STRATEGIES = ("default", "mirrored")
# Params the Keras equivalents express; any other setting is refused by name.
_PARAMS = {"dense": ("hidden_units", "num_classes", "learning_rate"),
           "lstm": ("num_units", "num_classes", "learning_rate")}


def add_engine_flag(parser):
    """Adds ``--engine`` to the train parser."""
    parser.add_argument("--engine", choices=ENGINES, default="estimator",
                        help="train with the Estimator (default), Keras fit, or a custom "
                             "training loop: the TF2 paths run the built-in model on the "
                             "built-in data and print the same metrics (see docs/migration.md)")


def check_settings(settings, engine):
    """Refuses the settings the TF2 engines do not express, each by name."""
    if settings.strategy not in _STRATEGIES:
        raise UsageError(f"strategy must be one of {', '.join(_STRATEGIES)} with engine "
                         f"{engine!r}. Received: strategy={settings.strategy!r}")
    if settings.train_data:
        raise UsageError(f"train_data must be left out with engine {engine!r} (it trains on "
                         f"the built-in data). Received: train_data={settings.train_data!r}")
    if settings.mixed_precision is not None:
        raise UsageError(f"mixed_precision must be none with engine {engine!r} (the Estimator "
                         f"engine computes in it). Received: "
                         f"mixed_precision={settings.mixed_precision!r}")
    for name in settings.params:
        if name not in _PARAMS[settings.model]:
            raise UsageError(f"params must be among {', '.join(_PARAMS[settings.model])} with "
                             f"engine {engine!r}. Received: {name}={settings.params[name]!r}")


def _strategy(settings):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from estimator_dist import strategies  # pylint: disable=import-outside-toplevel

    if settings.strategy == "default":
        return tf.distribute.get_strategy()
    replicas = settings.num_replicas or strategies.DEFAULT_CPU_REPLICAS
    strategies.setup_cpu_replicas(replicas)
    return tf.distribute.MirroredStrategy(
        [f"/cpu:{i}" for i in range(replicas)],
        cross_device_ops=tf.distribute.ReductionToOneDevice(reduce_to_device="/cpu:0"))


def keras_model(model, params, x_shape):
    """The Keras equivalent of built-in ``model`` ("dense" or "lstm"): inputs ``{"x"}`` of
    one example's ``x_shape``, output the logits; layers named as in the model_fn."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    x = tf.keras.Input(list(x_shape), name="x")
    if model == "dense":
        net = x
        for i, units in enumerate(params["hidden_units"]):
            net = tf.keras.layers.Dense(units, activation="relu", name=f"hidden_{i}")(net)
    else:
        net = tf.keras.layers.LSTM(params["num_units"], name="lstm_0")(x)
    logits = tf.keras.layers.Dense(params["num_classes"], name="logits")(net)
    return tf.keras.Model({"x": x}, logits)


def _keras_engine(model, train, evaluation, *, steps, batch_size, eval_steps):
    """Trains with ``fit``; returns (eval metrics, training seconds)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    del batch_size  # fit reads the batches as the dataset makes them.
    marks = []
    clock = tf.keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: marks.append(time.monotonic()))
    model.fit(train, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[clock])
    seconds = marks[-1] - marks[0]  # After the first step, which traces the function.
    loss, accuracy = model.evaluate(evaluation, steps=eval_steps, verbose=0)
    return {"accuracy": accuracy, "loss": loss}, seconds


def _loop_engine(model, train, evaluation, *, steps, batch_size, eval_steps):
    """Trains with a custom loop: ``strategy.run`` per step, ``strategy.reduce`` of sums."""
    del eval_steps  # The loop reads the eval set to its end.
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    strategy, total = model.distribute_strategy, tf.distribute.ReduceOp.SUM

    def losses(x, y):
        logits = model(x, training=True)
        return tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True), logits

    @tf.function
    def train_step(iterator):
        def step(x, y):
            with tf.GradientTape() as tape:
                per_example, _ = losses(x, y)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=batch_size)
            variables = model.trainable_variables
            model.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        return strategy.reduce(total, strategy.run(step, args=next(iterator)), axis=None)

    @tf.function
    def eval_step(batch):
        def step(x, y):
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
    metrics: dict  # accuracy and loss over the eval set.
    steps: int
    batch_size: int  # Global.
    seconds: float  # Training from the end of the first step (which traces) to the last.

    @property
    def examples_per_second(self):
        return (self.steps - 1) * self.batch_size / self.seconds if self.seconds else 0.0


def run(settings, engine):
    """Trains the built-in model on the TF2 ``engine`` ("keras" or "loop"); evaluates it.

    Raises:
      UsageError: settings the engine does not express (``check_settings``).
    """
    check_settings(settings, engine)
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from estimator_dist.models import MODELS  # pylint: disable=import-outside-toplevel
    from input_fns import from_arrays  # pylint: disable=import-outside-toplevel

    builtin = MODELS[settings.model]
    params = {**builtin.params, **settings.params}
    batch_size = settings.batch_size or builtin.batch_size
    steps = settings.max_steps or builtin.max_steps
    strategy = _strategy(settings)
    tf.keras.utils.set_random_seed(settings.seed)
    train, evaluation = builtin.train_data(), builtin.eval_data()
    train_fn = from_arrays(train.features, train.labels, batch_size=batch_size,
                           seed=settings.seed)
    eval_fn = from_arrays(evaluation.features, evaluation.labels, batch_size=batch_size,
                          shuffle=False, num_epochs=1)
    with strategy.scope():
        model = keras_model(settings.model, params, train.features["x"].shape[1:])
        model.compile(optimizer=tf.keras.optimizers.Adam(params["learning_rate"]),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    metrics, seconds = _ENGINE_FNS[engine](
        model, strategy.distribute_datasets_from_function(train_fn),
        strategy.distribute_datasets_from_function(eval_fn), steps=steps,
        batch_size=batch_size, eval_steps=len(evaluation.labels) // batch_size)
    return EngineResult(engine, strategy.num_replicas_in_sync, metrics, steps, batch_size,
                        seconds)


def print_result(result, settings):
    """Prints ``result`` in the lines of the Estimator run's summary."""
    metrics = "  ".join(f"{k} {v:.4f}" for k, v in sorted(result.metrics.items()))
    print(f"engine     {result.engine}: {settings.model} under {settings.strategy}, "
          f"{result.replicas} replica(s), global batch {result.batch_size}")
    print(f"metrics    {metrics}  (step {result.steps})")
    print(f"training   {result.steps} steps in {result.seconds:.1f} s: "
          f"{result.examples_per_second:,.0f} examples/s, "
          f"{(result.steps - 1) / result.seconds:.1f} steps/s")
