"""``tf.compat.v1.layers`` and ``tf.compat.v1.nn.rnn_cell`` under Keras 3, from tf-keras.

TensorFlow 2.16 and later serve both from Keras; with Keras 3 as ``tf.keras`` every name
raises "`dense` is not available with Keras 3." (``BasicLSTMCell`` alike), although the TF1
layers and cells of an Estimator model_fn have nothing to do with the user's Keras. tf-keras
still ships them (``tf_keras.api._v1.keras.__internal__.legacy``), as
``TF_USE_LEGACY_KERAS=1`` would route them, but that also turns the user's own ``tf.keras``
into Keras 2. This binds only the two modules to tf-keras's, leaving ``tf.keras`` alone.
Variable names and checkpoints are those of TensorFlow 2.15's layers and cells.
"""
from __future__ import annotations

import importlib

_LEGACY = "tf_keras.api._v1.keras.__internal__.legacy"


def install() -> None:
    """Binds the v1 layers and RNN cells to tf-keras's (idempotent)."""
    import tensorflow as tf  # Late: loads TensorFlow.

    tf.compat.v1.layers = importlib.import_module(f"{_LEGACY}.layers")
    tf.compat.v1.nn.rnn_cell = importlib.import_module(f"{_LEGACY}.rnn_cell")
