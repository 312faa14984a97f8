"""A ``TPUEstimator(...)`` constructor kept as written, given a config of another strategy.

A TPUEstimator program moved to mirrored or multi_worker by its config line alone hands
``TPUEstimator`` a ``RunConfig`` from ``make_run_config``, and TF 2.15 refuses it:
"`config` must be provided with type `tpu_config.RunConfig`" (``TPUEstimator.__init__``,
checked on tensorflow-estimator 2.15.0).

``install()`` (called by ``make_run_config`` for every strategy but "tpu") gives
``TPUEstimator`` a ``__new__`` that, for such a config, returns what
``estimator_dist.make_estimator`` builds from the same arguments: a plain Estimator under
the strategy, ``train_batch_size`` / ``eval_batch_size`` / ``predict_batch_size`` global
as in TPUEstimator, and ``params["batch_size"]`` the per-replica batch of each mode (as
TPUEstimator gives it per shard). Any other config reaches TensorFlow's constructor
unchanged.
"""
import tensorflow as tf

from estimator_dist.errors import UsageError

_TPU_ESTIMATOR = tf.compat.v1.estimator.tpu.TPUEstimator


def _kept_new(cls, model_fn=None, model_dir=None, config=None, params=None, use_tpu=True,
              train_batch_size=None, eval_batch_size=None, predict_batch_size=None,
              *args, warm_start_from=None, embedding_config_spec=None, **kwargs):
    """``TPUEstimator.__new__``: ``make_estimator``'s Estimator for a strategy config."""
    # pylint: disable=import-outside-toplevel  (estimator imports run_config, which imports this)
    from estimator_dist import estimator
    from estimator_dist.distribute import run_config

    del use_tpu, args, kwargs  # No TPU under a tf.distribute strategy; TPU-only settings.
    if not isinstance(config, run_config.StrategyRunConfig):
        return object.__new__(cls)
    if embedding_config_spec is not None:
        raise UsageError(
            "embedding_config_spec needs a TPU: build the Estimator with "
            "estimator_dist.make_estimator for this strategy and use embedding columns. "
            "Received: embedding_config_spec with a non-TPU config")
    if model_dir is not None:
        config = config.replace(model_dir=model_dir)
    return estimator.make_estimator(
        model_fn, config, params, batch_size=train_batch_size,
        eval_batch_size=eval_batch_size, predict_batch_size=predict_batch_size,
        warm_start_from=warm_start_from)


def install():
    """Lets ``TPUEstimator(...)`` take a ``make_run_config`` strategy config (idempotent)."""
    _TPU_ESTIMATOR.__new__ = staticmethod(_kept_new)
