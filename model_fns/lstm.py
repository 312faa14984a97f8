"""``lstm_model_fn``: a stack of LSTM layers (``BasicLSTMCell``'s variables) with explicit
state."""
from __future__ import annotations

from typing import Any, Mapping

import tensorflow as tf

from model_fns import _features, _heads, _lstm_stack, _params, _stream_state

v1 = tf.compat.v1
ModeKeys = tf.estimator.ModeKeys

TASKS = ("classification", "regression")
OUTPUTS = ("last", "sequence")

PARAMS = {
    "num_units": _params.Param(_params.POSITIVE_INT),
    "num_classes": _params.Param(_params.optional(_params.CLASS_COUNT), None),
    "num_layers": _params.Param(_params.POSITIVE_INT, 1),
    "dropout": _params.Param(_params.DROPOUT_RATE, 0.0),
    "task": _params.Param(_params.one_of(TASKS), "classification"),
    "num_outputs": _params.Param(_params.POSITIVE_INT, 1),
    "output": _params.Param(_params.one_of(OUTPUTS), "last"),
    "num_streams": _params.Param(_params.optional(_params.POSITIVE_INT), None),
    **_heads.TRAINING_PARAMS,
}


def resolve_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """``params`` checked against ``PARAMS`` and the rules between them, with defaults
    filled in (``ValueError`` names the param, the rule and the value)."""
    params = _params.resolve(params, PARAMS)
    if params["task"] == "classification" and params["num_classes"] is None:
        raise _params.error("num_classes", "an int >= 2 when task is 'classification'", None)
    return params


def state_width(params: Mapping[str, Any]) -> int:
    """The width of ``state_c`` and ``state_h``: ``num_layers * num_units`` (layer 0's units
    first, see ``model_fns._lstm_stack``); ``num_layers`` defaults as in ``PARAMS``."""
    return params.get("num_layers", PARAMS["num_layers"].default) * params["num_units"]


def _head(params: dict[str, Any]) -> _heads.Head:
    if params["task"] == "regression":
        return _heads.RegressionHead(params["num_outputs"])
    return _heads.ClassificationHead(params["num_classes"])


def _batch_size(x: tf.Tensor) -> int | tf.Tensor:
    return x.shape[0] if x.shape[0] is not None else tf.shape(x)[0]


def _given_state(features: _features.Features, x: tf.Tensor,
                 state_size: int) -> tuple[tf.Tensor, tf.Tensor]:
    """``state_c``/``state_h`` from the features, or zeros when neither is given."""
    dims, text = [x.shape[0], state_size], f"[batch, {state_size}]"
    state = [_features.optional(features, name, text, dims) for name in ("state_c", "state_h")]
    if (state[0] is None) != (state[1] is None):
        given = "state_c" if state[0] is not None else "state_h"
        raise ValueError("state_c and state_h must be given together. "
                         f"Received: only {given}")
    if state[0] is None:
        zeros = tf.zeros([_batch_size(x), state_size], tf.float32)
        return zeros, zeros
    return state[0], state[1]


def _head_inputs(outputs: tf.Tensor, sequence_length: tf.Tensor | None,
                 output: str) -> tuple[tf.Tensor, tf.Tensor | None]:
    """The outputs the logits are computed from, and the loss weights (None: all 1).

    ``output="last"``: each row's last valid step. ``"sequence"``: every step, with
    steps past ``sequence_length`` weighted 0.
    """
    if output == "last":
        if sequence_length is None:
            return outputs[:, -1], None
        return tf.gather(outputs, tf.maximum(sequence_length - 1, 0), batch_dims=1), None
    if sequence_length is None:
        return outputs, None
    time = outputs.shape[1] if outputs.shape[1] is not None else tf.shape(outputs)[1]
    return outputs, tf.sequence_mask(sequence_length, time, dtype=tf.float32)


def lstm_model_fn(features: _features.Features, labels: tf.Tensor | None, mode: str,
                  params: Mapping[str, Any] | None) -> _heads.Spec:
    """An LSTM over feature ``x`` float [batch, time, dim].

    Features:
      x: float [batch, time, dim].
      sequence_length: optional int [batch]; each row's steps past it are ignored and
        its state stays as it was after its last step.
      state_c, state_h: optional float [batch, num_layers * num_units], the initial
        state (zeros when absent). See ``model_fns._lstm_stack`` for the layout.
      stream, reset: with ``num_streams``, in TRAIN and EVAL (see below).

    Labels: class ids [batch] (``output="last"``) or [batch, time] (``"sequence"``);
    for regression the same with a trailing ``num_outputs`` axis.

    Predictions (and the ``serving_default`` outputs): ``logits``, ``state_c``,
    ``state_h`` (the final state, laid out like the initial state), plus
    ``probabilities`` and ``classes`` (classification) or ``predictions`` (regression).
    Handing a call's final state to the next call over the following chunk of a
    sequence gives the same result as one call over the whole sequence.

    Stateful truncated BPTT: with ``num_streams=K``, TRAIN and EVAL carry each
    stream's state from one step to the next instead of reading ``state_c``/``state_h``;
    see ``model_fns._stream_state`` for the input and state contract.

    Params (checked; ``ValueError`` names the param, the rule and the value):
      num_units, num_classes (classification), learning_rate: required.
      num_layers (1), dropout (0.0), task ("classification" or "regression"),
      num_outputs (1, regression), output ("last" or "sequence": logits for the last
      step or every step), num_streams (None), optimizer ("adam"), clip_norm (None).
    """
    params = resolve_params(params)
    num_units, num_layers = params["num_units"], params["num_layers"]
    state_size = state_width(params)
    x = _features.required(features, "x", "[batch, time, dim]", [None, None, None])
    sequence_length = _features.optional(features, "sequence_length", "[batch]",
                                         [x.shape[0]], tf.int32)
    stateful = params["num_streams"] is not None and mode != ModeKeys.PREDICT
    if stateful:
        initial_c, initial_h, save_state = _stream_state.carried_state(
            features, training=mode == ModeKeys.TRAIN, num_streams=params["num_streams"],
            state_size=state_size, on_tpu=params.get("use_tpu", False))
    else:
        initial_c, initial_h = _given_state(features, x, state_size)
    outputs, final_c, final_h = _lstm_stack.run(
        x, initial_c, initial_h, num_units=num_units, num_layers=num_layers,
        sequence_length=sequence_length, dropout=params["dropout"],
        training=mode == ModeKeys.TRAIN, needs_gradient=mode == ModeKeys.TRAIN)
    head = _head(params)
    outputs, weights = _head_inputs(outputs, sequence_length, params["output"])
    logits = v1.layers.dense(outputs, head.width, name="logits")
    return _heads.make_spec(
        mode, head=head, logits=logits, labels=labels, params=params, weights=weights,
        predictions={"state_c": final_c, "state_h": final_h},
        loss_dependencies=[save_state(final_c, final_h)] if stateful else ())
