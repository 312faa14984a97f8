"""Builds the Estimator for a RunConfig: ``tf.estimator.Estimator`` or ``TPUEstimator``."""
import tensorflow as tf

from estimator_dist.run_config import TPURunConfig


def make_estimator(model_fn, config, params=None, *, batch_size=None, warm_start_from=None):
    """Returns the Estimator that runs ``model_fn`` under ``config``.

    A plain ``tf.estimator.Estimator`` for every strategy but "tpu"; for "tpu" a
    ``TPUEstimator`` (on CPU when the config asks for ``use_tpu=False``), which needs the
    global ``batch_size``. Input functions for a ``TPUEstimator`` go through
    ``tpu_input_fn`` first.
    """
    if not isinstance(config, TPURunConfig):
        return tf.estimator.Estimator(model_fn, config=config, params=params,
                                      warm_start_from=warm_start_from)
    if batch_size is None:
        raise ValueError("batch_size must be given for a TPUEstimator. Received: batch_size=None")
    return tf.compat.v1.estimator.tpu.TPUEstimator(
        model_fn, config=config, params=params, use_tpu=config.use_tpu,
        train_batch_size=batch_size, eval_batch_size=batch_size,
        predict_batch_size=batch_size, warm_start_from=warm_start_from)


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
