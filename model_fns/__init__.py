"""Reusable Estimator model_fns.

Imports nothing from ``estimator_dist``: take this package alone into any codebase.

Besides the model_fns, the facts other code needs to read their params and checkpoints:
each model's params resolver, which params shape training only, and the BasicLSTMCell
layout of the LSTM's checkpoints (the forget bias it adds when run, the scope of each
layer's variables).
"""
from model_fns import dense, lstm
from model_fns._heads import TRAINING_PARAMS as _TRAINING_PARAMS
from model_fns._lstm_stack import FORGET_BIAS as LSTM_FORGET_BIAS
from model_fns._lstm_stack import cell_scopes as lstm_cell_scopes
from model_fns._params import TPU_ESTIMATOR_KEYS
from model_fns.dense import dense_classifier_model_fn
from model_fns.lstm import lstm_model_fn
from model_fns.lstm import state_width as lstm_state_width

# Params that shape training only (optimizer, learning rate, clipping), not the model.
TRAINING_PARAMS = tuple(_TRAINING_PARAMS)

__all__ = ["dense", "dense_classifier_model_fn", "lstm", "lstm_model_fn", "LSTM_FORGET_BIAS",
           "lstm_cell_scopes", "lstm_state_width", "TPU_ESTIMATOR_KEYS", "TRAINING_PARAMS"]
