"""``dense_classifier_model_fn``: a feed-forward softmax classifier."""
from __future__ import annotations

from typing import Any, Mapping

import tensorflow as tf

from model_fns import _features, _heads, _params

v1 = tf.compat.v1
ModeKeys = tf.estimator.ModeKeys

PARAMS = {
    "hidden_units": _params.Param(_params.UNITS_LIST),
    "num_classes": _params.Param(_params.CLASS_COUNT),
    "dropout": _params.Param(_params.DROPOUT_RATE, 0.0),
    "batch_norm": _params.Param(_params.BOOL, False),
    **_heads.TRAINING_PARAMS,
}


def resolve_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """``params`` checked against ``PARAMS`` with defaults filled in (``ValueError`` names
    the param, the rule and the value)."""
    return _params.resolve(params, PARAMS)


def dense_classifier_model_fn(features: _features.Features, labels: tf.Tensor | None, mode: str,
                              params: Mapping[str, Any] | None) -> _heads.Spec:
    """A dense softmax classifier over feature ``x`` float [batch, dim].

    Each hidden layer is a dense layer (``hidden_{i}``), then batch norm
    (``batch_norm_{i}``, when asked for), ReLU and dropout (in TRAIN).

    Labels: class ids [batch]. Predictions (and the ``serving_default`` outputs):
    ``logits``, ``probabilities``, ``classes``.

    Params (checked; ``ValueError`` names the param, the rule and the value):
      hidden_units (list of ints), num_classes, learning_rate: required.
      dropout (0.0), batch_norm (False), optimizer ("adam"), clip_norm (None).
    """
    params = resolve_params(params)
    training = mode == ModeKeys.TRAIN
    net = _features.required(features, "x", "[batch, dim]", [None, None])
    known_updates = len(v1.get_collection(v1.GraphKeys.UPDATE_OPS))
    for i, units in enumerate(params["hidden_units"]):
        net = v1.layers.dense(net, units, use_bias=not params["batch_norm"], name=f"hidden_{i}")
        if params["batch_norm"]:
            net = v1.layers.batch_normalization(net, training=training, name=f"batch_norm_{i}")
        net = tf.nn.relu(net)
        if params["dropout"]:
            net = v1.layers.dropout(net, rate=params["dropout"], training=training)
    head = _heads.ClassificationHead(params["num_classes"])
    logits = v1.layers.dense(net, head.width, name="logits")
    # Only this call's batch norm updates: under a strategy the collection also holds
    # the other replicas'.
    update_ops = v1.get_collection(v1.GraphKeys.UPDATE_OPS)[known_updates:]
    return _heads.make_spec(mode, head=head, logits=logits, labels=labels, params=params,
                            update_ops=update_ops)
