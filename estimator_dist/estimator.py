"""Builds the Estimator for a RunConfig: ``tf.estimator.Estimator`` or ``TPUEstimator``."""
import functools
import inspect

import tensorflow as tf

from estimator_dist.distribute.input_checks import PerReplicaBatchParams
from estimator_dist.distribute.run_config import TPURunConfig
from estimator_dist.errors import UsageError, check_positive_int
from estimator_dist import mends
from estimator_dist.mends import params_by_mode
from estimator_dist.mends import steps_per_run as steps_per_run_lib

_MODEL_FN_ARGS = ("features", "labels", "mode", "params", "config")
_MODE = tf.estimator.ModeKeys


def make_estimator(model_fn, config, params=None, *, batch_size=None, eval_batch_size=None,
                   predict_batch_size=None, warm_start_from=None, steps_per_run=None):
    """Returns the Estimator that runs ``model_fn`` under ``config``.

    A plain ``tf.estimator.Estimator`` for every strategy but "tpu"; for "tpu" a
    ``TPUEstimator`` (on CPU when the config asks for ``use_tpu=False``), which needs the
    global ``batch_size``. Input functions for a ``TPUEstimator`` go through
    ``tpu_input_fn`` first.

    A TPUEstimator program runs unchanged on the plain Estimator too: a
    ``TPUEstimatorSpec`` its model_fn returns becomes an ``EstimatorSpec``
    (``as_estimator_spec()``), and given ``batch_size`` (global) its input_fn and model_fn
    find ``params["batch_size"]`` = the per-replica batch, as TPUEstimator gives per shard.
    ``batch_size``, ``eval_batch_size`` and ``predict_batch_size`` are TPUEstimator's
    ``train_batch_size``, ``eval_batch_size`` and ``predict_batch_size``: global, one per
    mode (the eval and predict sizes default to ``batch_size``).

    ``steps_per_run`` (default: the config's, see ``make_run_config``; else 1) trains that
    many steps per ``Session.run`` off TPU (``steps_per_run.LoopEstimator``); on TPU the
    config's ``iterations_per_loop`` does that.

    A "tpu" config with ``mixed_precision="bfloat16"`` builds ``model_fn`` under
    ``tf.compat.v1.tpu.bfloat16_scope()`` (see ``estimator_dist.precision``).
    """
    sizes = {_MODE.TRAIN: batch_size, _MODE.EVAL: eval_batch_size or batch_size,
             _MODE.PREDICT: predict_batch_size or batch_size}
    if not isinstance(config, TPURunConfig):
        model_fn = _estimator_spec_model_fn(model_fn)
        steps = steps_per_run_lib.steps_per_run_of(config, steps_per_run)
        if batch_size is None:
            by_mode = {}
        else:
            by_mode = _per_replica_params(params, sizes, config)
            params = by_mode[_MODE.TRAIN]
        if steps > 1:
            estimator = steps_per_run_lib.LoopEstimator(
                model_fn, config=config, params=params, warm_start_from=warm_start_from,
                steps_per_run=steps)
        else:
            estimator = tf.estimator.Estimator(model_fn, config=config, params=params,
                                               warm_start_from=warm_start_from)
        if len({p["batch_size"] for p in by_mode.values()}) > 1:
            mends.require("params_by_mode", "eval_batch_size or predict_batch_size")
            params_by_mode.apply(estimator, by_mode)
        return estimator
    if batch_size is None:
        raise UsageError("batch_size must be given for a TPUEstimator. Received: batch_size=None")
    if config.mixed_precision == "bfloat16":
        model_fn = _bfloat16_scope_model_fn(model_fn)
    return tf.compat.v1.estimator.tpu.TPUEstimator(
        model_fn, config=config, params=params, use_tpu=config.use_tpu,
        train_batch_size=batch_size, eval_batch_size=sizes[_MODE.EVAL],
        predict_batch_size=sizes[_MODE.PREDICT], warm_start_from=warm_start_from)


def _per_replica_params(params, sizes, config):
    """{mode: params whose "batch_size" is that mode's per-replica batch}.

    Training runs under ``train_distribute``, evaluation under ``eval_distribute`` (one
    device when None), prediction on one device.
    """
    strategies = {_MODE.TRAIN: config.train_distribute,
                  _MODE.EVAL: config.eval_distribute, _MODE.PREDICT: None}
    names = {_MODE.TRAIN: "batch_size", _MODE.EVAL: "eval_batch_size",
             _MODE.PREDICT: "predict_batch_size"}
    by_mode = {}
    for mode, size in sizes.items():
        check_positive_int(names[mode], size)
        strategy = strategies[mode]
        replicas = strategy.num_replicas_in_sync if strategy is not None else 1
        if size % replicas:
            raise UsageError(f"{names[mode]} must be a multiple of the {replicas} replicas. "
                             f"Received: {names[mode]}={size}")
        by_mode[mode] = PerReplicaBatchParams(params or {}, batch_size=size // replicas)
    return by_mode


def _with_accepted_args(model_fn):
    """``model_fn`` as a function of all five model_fn arguments, passing on those it takes."""
    accepted = inspect.signature(model_fn).parameters

    def call(**given):
        return model_fn(**{name: given[name] for name in _MODEL_FN_ARGS if name in accepted})

    return call


def _estimator_spec_model_fn(model_fn):
    """Wraps ``model_fn`` so a ``TPUEstimatorSpec`` it returns becomes an ``EstimatorSpec``."""
    call = _with_accepted_args(model_fn)

    @functools.wraps(model_fn)
    def wrapped(features, labels, mode, params, config):
        spec = call(features=features, labels=labels, mode=mode, params=params, config=config)
        if isinstance(spec, tf.compat.v1.estimator.tpu.TPUEstimatorSpec):
            return spec.as_estimator_spec()
        return spec

    del wrapped.__wrapped__  # Estimator reads the wrapper's own arguments.
    return wrapped


def _bfloat16_scope_model_fn(model_fn):
    """Wraps ``model_fn`` to build under ``tf.compat.v1.tpu.bfloat16_scope()``, the TPU way
    to mixed bfloat16: variables asked for in bfloat16 are stored float32 and read as
    bfloat16."""
    call = _with_accepted_args(model_fn)

    @functools.wraps(model_fn)
    def wrapped(features, labels, mode, params, config):
        with tf.compat.v1.tpu.bfloat16_scope():
            return call(features=features, labels=labels, mode=mode, params=params,
                        config=config)

    del wrapped.__wrapped__  # Estimator reads the wrapper's own arguments.
    return wrapped


def tpu_input_fn(input_fn):
    """Adapts an ``input_fn(input_context=None)`` to TPUEstimator's ``input_fn(params)``.

    TPUEstimator hands ``params["context"]``; on a TPU host this becomes an
    ``InputContext`` for that host's share of the global batch. On CPU (``use_tpu=False``)
    the input_fn runs whole, as on one device.
    """

    def wrapped(params):
        context = params.get("context")
        if context is None or not params.get("use_tpu", False):
            return input_fn()
        _, host_id, num_hosts = context.current_input_fn_deployment()
        return input_fn(input_context=tf.distribute.InputContext(
            num_input_pipelines=num_hosts, input_pipeline_id=host_id,
            num_replicas_in_sync=context.num_replicas))

    return wrapped
