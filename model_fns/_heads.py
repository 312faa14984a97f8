"""Shared pieces of the model_fns: heads, optimizers, TPU wrapping and the spec.

A head turns logits and labels into predictions, a loss and eval metrics. ``make_spec``
builds the ``EstimatorSpec`` from a head, or a ``TPUEstimatorSpec`` when the model_fn runs
under ``TPUEstimator`` (which puts ``use_tpu`` in params).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence, Union

import tensorflow as tf

from model_fns import _params

if TYPE_CHECKING:
    # What a model_fn returns; TPUEstimator's spec under TPUEstimator.
    Spec = Union[tf.estimator.EstimatorSpec, tf.compat.v1.estimator.tpu.TPUEstimatorSpec]

v1 = tf.compat.v1
ModeKeys = tf.estimator.ModeKeys

OPTIMIZERS = {
    "sgd": v1.train.GradientDescentOptimizer,
    "momentum": lambda learning_rate: v1.train.MomentumOptimizer(learning_rate, momentum=0.9),
    "adam": v1.train.AdamOptimizer,
    "adagrad": v1.train.AdagradOptimizer,
    "rmsprop": v1.train.RMSPropOptimizer,
}

# Params every model_fn takes for training.
TRAINING_PARAMS = {
    "learning_rate": _params.Param(_params.POSITIVE_NUMBER),
    "optimizer": _params.Param(_params.one_of(OPTIMIZERS), "adam"),
    "clip_norm": _params.Param(_params.optional(_params.POSITIVE_NUMBER), None),
}


def _target_shape(logits: tf.Tensor, trailing: Sequence[int]) -> list[int] | tf.Tensor:
    """The static shape of ``logits`` without its last axis (plus ``trailing``)."""
    shape = logits.shape[:-1].concatenate(trailing)
    if shape.is_fully_defined():
        return shape.as_list()
    return tf.concat([tf.shape(logits)[:-1], trailing], axis=0)


@dataclasses.dataclass(frozen=True)
class ClassificationHead:
    """Softmax over ``num_classes``; labels are class ids shaped like logits[..., 0]."""

    num_classes: int

    @property
    def width(self) -> int:
        """The size of the logits' last axis."""
        return self.num_classes

    def predictions(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"logits": logits, "probabilities": tf.nn.softmax(logits),
                "classes": tf.argmax(logits, axis=-1)}

    def labels(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        return tf.reshape(tf.cast(labels, tf.int64), _target_shape(logits, []))

    def loss(self, labels: tf.Tensor, logits: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
        return v1.losses.sparse_softmax_cross_entropy(labels, logits, weights)

    def batch_metrics(self, labels: tf.Tensor, logits: tf.Tensor,
                      weights: tf.Tensor) -> dict[str, tf.Tensor]:
        correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1), labels), tf.float32)
        return {"batch_accuracy": tf.reduce_sum(correct * weights) / tf.reduce_sum(weights)}

    def metrics(self, labels: tf.Tensor, logits: tf.Tensor,
                weights: tf.Tensor) -> dict[str, tuple[tf.Tensor, tf.Tensor]]:
        metrics = {"accuracy": v1.metrics.accuracy(labels, tf.argmax(logits, axis=-1), weights)}
        if self.num_classes == 2:
            metrics["auc"] = v1.metrics.auc(labels, tf.nn.softmax(logits)[..., 1], weights)
        return metrics


@dataclasses.dataclass(frozen=True)
class RegressionHead:
    """Mean squared error over ``num_outputs`` values; labels shaped like logits."""

    num_outputs: int

    @property
    def width(self) -> int:
        """The size of the logits' last axis."""
        return self.num_outputs

    def predictions(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"logits": logits, "predictions": logits}

    def labels(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        return tf.reshape(tf.cast(labels, tf.float32), _target_shape(logits, [self.num_outputs]))

    def loss(self, labels: tf.Tensor, logits: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
        return v1.losses.mean_squared_error(labels, logits, weights[..., None])

    def batch_metrics(self, labels: tf.Tensor, logits: tf.Tensor,
                      weights: tf.Tensor) -> dict[str, tf.Tensor]:
        error = tf.abs(labels - logits) * weights[..., None]
        return {"batch_mae": tf.reduce_sum(error) / (tf.reduce_sum(weights) * self.num_outputs)}

    def metrics(self, labels: tf.Tensor, logits: tf.Tensor,
                weights: tf.Tensor) -> dict[str, tuple[tf.Tensor, tf.Tensor]]:
        weights = weights[..., None] * tf.ones_like(labels)
        return {"rmse": v1.metrics.root_mean_squared_error(labels, logits, weights),
                "mae": v1.metrics.mean_absolute_error(labels, logits, weights)}


Head = Union[ClassificationHead, RegressionHead]


def _sum_across_replicas(strategy: tf.distribute.Strategy,
                         *values: tf.Tensor) -> list[tf.Tensor]:
    # ReplicaContext.all_reduce wraps a custom gradient that fails in graph mode.
    return strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.SUM,
                                             [(value, value) for value in values])


def _clipped(grads: Sequence[tf.Tensor], clip_norm: float,
             on_tpu: bool) -> tuple[list[tf.Tensor], tf.Tensor]:
    """Clips the gradient summed over replicas (TPU shards) to a global norm of ``clip_norm``.

    So a run clips the same way on one device and under a strategy. Returns the
    gradients to apply and the summed gradient's norm before clipping. The gradients are
    the clipped sum on TPU (apply them with the plain optimizer) and the clipped sum
    divided by the number of replicas elsewhere (the optimizer sums the replicas' equal
    copies).
    """
    if on_tpu:
        return tf.clip_by_global_norm([v1.tpu.cross_replica_sum(g) for g in grads], clip_norm)
    context = tf.distribute.get_replica_context()
    replicas = context.num_replicas_in_sync
    if replicas > 1:
        grads = context.merge_call(_sum_across_replicas, args=tuple(grads))
    clipped, norm = tf.clip_by_global_norm(grads, clip_norm)
    return [g / replicas for g in clipped], norm


def _train_op(loss: tf.Tensor, params: dict[str, Any],
              update_ops: Sequence[tf.Operation]) -> tf.Operation:
    """Minimizes ``loss`` (cross-shard on TPU), clipping gradients when ``clip_norm`` is set.

    Off TPU, summary ``gradient_norm`` is the norm of the whole batch's gradient (before
    clipping): always on one device, under a strategy only with ``clip_norm``, which is
    when that gradient is summed over replicas here rather than inside the optimizer.
    """
    on_tpu = params.get("use_tpu", False)
    base = OPTIMIZERS[params["optimizer"]](params["learning_rate"])
    optimizer = v1.tpu.CrossShardOptimizer(base) if on_tpu else base
    grads_and_vars = [(g, v) for g, v in optimizer.compute_gradients(loss) if g is not None]
    grads: Sequence[tf.Tensor]
    grads, variables = zip(*grads_and_vars)
    norm = None
    if params["clip_norm"] is not None:
        grads, norm = _clipped(grads, params["clip_norm"], on_tpu)
        if on_tpu:
            optimizer = base
    elif tf.distribute.get_replica_context().num_replicas_in_sync == 1:
        norm = tf.linalg.global_norm(grads)
    if norm is not None and not on_tpu:
        v1.summary.scalar("gradient_norm", norm)
    with tf.control_dependencies(update_ops):
        return optimizer.apply_gradients(zip(grads, variables),
                                         global_step=v1.train.get_global_step())


def _spec(params: dict[str, Any], **kwargs: Any) -> Spec:
    if "use_tpu" in params:
        return v1.estimator.tpu.TPUEstimatorSpec(**kwargs)
    return tf.estimator.EstimatorSpec(**kwargs)


def make_spec(mode: str, *, head: Head, logits: tf.Tensor, labels: tf.Tensor | None,
              params: dict[str, Any], predictions: dict[str, tf.Tensor] | None = None,
              weights: tf.Tensor | None = None, loss_dependencies: Sequence[tf.Operation] = (),
              update_ops: Sequence[tf.Operation] = ()) -> Spec:
    """The spec of a model_fn with output ``logits``.

    Args:
      mode: a ``tf.estimator.ModeKeys``.
      head: a ``ClassificationHead`` or ``RegressionHead``.
      logits: float [batch, ..., classes or outputs].
      labels: shaped like ``logits`` without its last axis (classification) or like
        ``logits`` (regression); None in PREDICT.
      params: the resolved params (``TRAINING_PARAMS`` among them).
      predictions: more prediction tensors (e.g. the final LSTM state).
      weights: float, shaped like ``logits`` without its last axis; 0 leaves an
        element out of the loss and metrics. Default: all ones.
      loss_dependencies: ops that run whenever the loss is computed (TRAIN and EVAL).
      update_ops: ops the train op runs first (e.g. batch norm's moving averages).

    Returns:
      An ``EstimatorSpec``, or a ``TPUEstimatorSpec`` under TPUEstimator. PREDICT exports
      every prediction under the ``serving_default`` signature.
    """
    outputs = head.predictions(logits)
    outputs.update(predictions or {})
    if mode == ModeKeys.PREDICT:
        export = {"serving_default": tf.estimator.export.PredictOutput(outputs)}
        return _spec(params, mode=mode, predictions=outputs, export_outputs=export)
    if labels is None:
        raise ValueError(f"labels must be given in {mode} mode. Received: labels=None")
    labels = head.labels(labels, logits)
    if weights is None:
        weights = tf.ones(_target_shape(logits, []), tf.float32)
    with tf.control_dependencies(loss_dependencies):
        loss = tf.identity(head.loss(labels, logits, weights))
    if mode == ModeKeys.EVAL:
        if "use_tpu" in params:
            tensors = {"labels": labels, "logits": logits, "weights": weights}
            return _spec(params, mode=mode, loss=loss, eval_metrics=(head.metrics, tensors))
        return _spec(params, mode=mode, loss=loss,
                     eval_metric_ops=head.metrics(labels, logits, weights))
    if not params.get("use_tpu", False):
        for name, value in head.batch_metrics(labels, logits, weights).items():
            v1.summary.scalar(name, value)
    return _spec(params, mode=mode, loss=loss, train_op=_train_op(loss, params, update_ops))
