"""Every param rule and feature check raises a ValueError naming the param or feature."""
import re

import numpy as np
import pytest
import tensorflow as tf

import model_fns

TRAIN, PREDICT = tf.estimator.ModeKeys.TRAIN, tf.estimator.ModeKeys.PREDICT
DENSE = {"hidden_units": [8], "num_classes": 3, "learning_rate": 0.1}
LSTM = {"num_units": 4, "num_classes": 3, "learning_rate": 0.1}
DENSE_X = {"x": np.zeros([2, 3], np.float32)}
LSTM_X = {"x": np.zeros([2, 5, 3], np.float32)}
LABELS = np.zeros([2], np.int64)


def _call(model_fn, features, params, mode=TRAIN, labels=LABELS):
    with tf.Graph().as_default():
        model_fn(features, labels, mode, params)


def _without(params, name):
    return {k: v for k, v in params.items() if k != name}


PARAM_ERRORS = [
    ("dense", _without(DENSE, "hidden_units"),
     "hidden_units must be a list of positive ints. Received: no hidden_units in params"),
    ("dense", dict(DENSE, hidden_units=[8, 0]),
     "hidden_units must be a list of positive ints. Received: hidden_units=[8, 0]"),
    ("dense", dict(DENSE, hidden_units="8"),
     "hidden_units must be a list of positive ints. Received: hidden_units='8'"),
    ("dense", dict(DENSE, num_classes=1),
     "num_classes must be an int >= 2. Received: num_classes=1"),
    ("dense", dict(DENSE, learning_rate=0),
     "learning_rate must be a positive number. Received: learning_rate=0"),
    ("dense", dict(DENSE, learning_rate="0.1"),
     "learning_rate must be a positive number. Received: learning_rate='0.1'"),
    ("dense", dict(DENSE, dropout=1.0),
     "dropout must be a number in [0, 1). Received: dropout=1.0"),
    ("dense", dict(DENSE, batch_norm="yes"),
     "batch_norm must be a bool. Received: batch_norm='yes'"),
    ("dense", dict(DENSE, optimizer="adamw"),
     "optimizer must be one of 'adagrad', 'adam', 'momentum', 'rmsprop', 'sgd'. "
     "Received: optimizer='adamw'"),
    ("dense", dict(DENSE, clip_norm=-1.0),
     "clip_norm must be None or a positive number. Received: clip_norm=-1.0"),
    ("dense", dict(DENSE, hidden_unit=[8]),
     "params must be among .*. Received: unknown params hidden_unit"),
    ("lstm", dict(LSTM, num_units=0), "num_units must be a positive int. Received: num_units=0"),
    ("lstm", dict(LSTM, num_units=True),
     "num_units must be a positive int. Received: num_units=True"),
    ("lstm", dict(LSTM, num_units=4.0),
     "num_units must be a positive int. Received: num_units=4.0"),
    ("lstm", _without(LSTM, "num_classes"),
     "num_classes must be an int >= 2 when task is 'classification'. Received: num_classes=None"),
    ("lstm", dict(LSTM, num_layers=0), "num_layers must be a positive int. Received: num_layers=0"),
    ("lstm", dict(LSTM, task="ranking"),
     "task must be one of 'classification', 'regression'. Received: task='ranking'"),
    ("lstm", dict(LSTM, task="regression", num_outputs=0),
     "num_outputs must be a positive int. Received: num_outputs=0"),
    ("lstm", dict(LSTM, output="first"),
     "output must be one of 'last', 'sequence'. Received: output='first'"),
    ("lstm", dict(LSTM, num_streams=0),
     "num_streams must be None or a positive int. Received: num_streams=0"),
    ("lstm", dict(LSTM, dropout=-0.1),
     "dropout must be a number in [0, 1). Received: dropout=-0.1"),
]


@pytest.mark.parametrize("model, params, message", PARAM_ERRORS,
                         ids=[f"{m}-{msg.split()[0]}-{i}" for i, (m, _, msg) in
                              enumerate(PARAM_ERRORS)])
def test_param_breaking_rule_raises_naming_it(model, params, message):
    model_fn = {"dense": model_fns.dense_classifier_model_fn, "lstm": model_fns.lstm_model_fn}
    features = DENSE_X if model == "dense" else LSTM_X
    pattern = re.escape(message).replace(re.escape(".*"), ".*")
    with pytest.raises(ValueError, match=f"^{pattern}$"):
        _call(model_fn[model], features, params)


FEATURE_ERRORS = [
    (model_fns.dense_classifier_model_fn, DENSE, {"z": DENSE_X["x"]},
     r"features must contain x, a tensor of shape \[batch, dim\]. Received: features with keys "
     r"\['z'\]"),
    (model_fns.dense_classifier_model_fn, DENSE, LSTM_X,
     r"x must be a tensor of shape \[batch, dim\]. Received: x with shape \(2, 5, 3\)"),
    (model_fns.lstm_model_fn, LSTM, DENSE_X,
     r"x must be a tensor of shape \[batch, time, dim\]. Received: x with shape \(2, 3\)"),
    (model_fns.lstm_model_fn, LSTM, dict(LSTM_X, state_c=np.zeros([2, 5], np.float32),
                                         state_h=np.zeros([2, 5], np.float32)),
     r"state_c must be a tensor of shape \[batch, 4\]. Received: state_c with shape \(2, 5\)"),
    (model_fns.lstm_model_fn, dict(LSTM, num_layers=2),
     dict(LSTM_X, state_c=np.zeros([2, 4], np.float32), state_h=np.zeros([2, 4], np.float32)),
     r"state_c must be a tensor of shape \[batch, 8\]. Received: state_c with shape \(2, 4\)"),
    (model_fns.lstm_model_fn, LSTM, dict(LSTM_X, state_h=np.zeros([2, 4], np.float32)),
     r"state_c and state_h must be given together. Received: only state_h"),
    (model_fns.lstm_model_fn, LSTM, dict(LSTM_X, sequence_length=np.array([5, 5, 5], np.int32)),
     r"sequence_length must be a tensor of shape \[batch\]. Received: sequence_length with "
     r"shape \(3,\)"),
    (model_fns.lstm_model_fn, dict(LSTM, num_streams=2), LSTM_X,
     r"features must contain stream, a tensor of shape \[batch\]. Received: features with keys "
     r"\['x'\]"),
]


@pytest.mark.parametrize("model_fn, params, features, message", FEATURE_ERRORS)
def test_feature_with_wrong_shape_raises_naming_it(model_fn, params, features, message):
    with pytest.raises(ValueError, match=message):
        _call(model_fn, features, params)


@pytest.mark.parametrize("model_fn, params, features", [
    (model_fns.dense_classifier_model_fn, DENSE, DENSE_X),
    (model_fns.lstm_model_fn, LSTM, LSTM_X),
])
def test_labels_missing_in_train_raises(model_fn, params, features):
    message = "labels must be given in train mode. Received: labels=None"
    with pytest.raises(ValueError, match=message):
        _call(model_fn, features, params, labels=None)


def test_tpu_estimator_params_pass_validation():
    params = dict(DENSE, use_tpu=False, batch_size=2, context=None)
    _call(model_fns.dense_classifier_model_fn, DENSE_X, params, mode=PREDICT, labels=None)
