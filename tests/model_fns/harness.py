"""One harness that runs a model_fn through TRAIN, EVAL and PREDICT under a strategy."""
import dataclasses

import numpy as np
import tensorflow as tf

import estimator_dist

# "tpu" is TPUEstimator on CPU (use_tpu=False): the TPU code path without a TPU.
STRATEGIES = ("default", "mirrored", "tpu")


@dataclasses.dataclass(frozen=True)
class Run:
    """What a harness run returns."""

    global_step: int
    metrics: dict
    predictions: list


def make_estimator(model_fn, params, strategy, model_dir, *, batch_size, **config_kwargs):
    """An Estimator for ``strategy`` (mirrored: 2 replicas; tpu: TPUEstimator on CPU)."""
    if strategy == "mirrored":
        config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir,
                                                **config_kwargs)
    elif strategy == "tpu":
        config = estimator_dist.make_run_config("tpu", use_tpu=False, model_dir=model_dir,
                                                iterations_per_loop=1, **config_kwargs)
    else:
        config = estimator_dist.make_run_config("default", model_dir=model_dir, **config_kwargs)
    return estimator_dist.make_estimator(model_fn, config, dict(params), batch_size=batch_size)


def from_arrays(features, labels=None, *, batch_size, shuffle=True, num_epochs=None, seed=0):
    """An ``input_fn(input_context=None)`` over arrays; ``batch_size`` is global."""

    def input_fn(input_context=None):
        data = features if labels is None else (features, labels)
        dataset = tf.data.Dataset.from_tensor_slices(data)
        if shuffle:
            dataset = dataset.shuffle(len(next(iter(features.values()))), seed=seed)
        per_replica = (input_context.get_per_replica_batch_size(batch_size) if input_context
                       else batch_size)
        return dataset.repeat(num_epochs).batch(per_replica, drop_remainder=True)

    return input_fn


def input_fn_for(strategy, input_fn):
    return estimator_dist.tpu_input_fn(input_fn) if strategy == "tpu" else input_fn


def run_all_modes(model_fn, params, features, labels, *, strategy, model_dir, batch_size=8,
                  steps=3):
    """Trains ``steps`` steps, evaluates one pass and predicts every row of ``features``."""
    estimator = make_estimator(model_fn, params, strategy, model_dir, batch_size=batch_size,
                               tf_random_seed=1)
    train = from_arrays(features, labels, batch_size=batch_size)
    evaluate = from_arrays(features, labels, batch_size=batch_size, shuffle=False, num_epochs=1)
    predict = from_arrays(features, batch_size=batch_size, shuffle=False, num_epochs=1)
    estimator.train(input_fn_for(strategy, train), max_steps=steps)
    metrics = estimator.evaluate(input_fn_for(strategy, evaluate))
    predictions = list(estimator.predict(input_fn_for(strategy, predict)))
    return Run(int(estimator.get_variable_value("global_step")), metrics, predictions)


def classes(rows, num_classes, *, seed=0, shape=()):
    """Random class ids [rows, *shape]."""
    return np.random.default_rng(seed).integers(0, num_classes, (rows, *shape)).astype(np.int64)


def floats(*shape, seed=0):
    """Standard normal float32 values."""
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)
