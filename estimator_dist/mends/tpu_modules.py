"""The three TPU modules TensorFlow 2.16 removed, as stand-ins that import and name the gap.

tensorflow-estimator 2.15's TPU modules import ``tensorflow.python.tpu.session_support``,
``tpu_embedding`` (and seven ``*Parameters`` classes from it) and ``tpu_embedding_gradient``
at import time, and its public API imports the TPU modules: without them no
``tf.estimator`` program starts, TPU or not. They are used only on a real TPU (graceful
shutdown hooks, the worker watchdog) or with an ``EmbeddingConfigSpec`` (TPU embedding
tables). Everything else of ``TPUEstimator`` (``use_tpu=False``, the CPU validation the
package's ``tpu`` strategy runs) never touches them.

Each stand-in imports; any use of one of its names raises one ``NotImplementedError``
naming the piece, that TensorFlow removed it, and the way out.
"""
from __future__ import annotations

import sys
import types
from typing import Any

_PACKAGE = "tensorflow.python.tpu"
_MODULES = {
    "session_support": "TPU graceful shutdown and worker watchdog (TPUEstimator on a TPU)",
    "tpu_embedding": "TPU embedding tables (TPUEstimator's EmbeddingConfigSpec)",
    "tpu_embedding_gradient": "TPU embedding gradients (TPUEstimator's EmbeddingConfigSpec)",
}


def _unavailable(module: str, name: str, piece: str) -> type:
    message = (f"{piece} is not available: TensorFlow 2.16 removed {_PACKAGE}.{module}, which "
               "tensorflow-estimator uses for it; run TPU training and TPU embeddings on "
               f"TensorFlow 2.15. Received: {_PACKAGE}.{module}.{name}")

    class Unavailable:
        """A removed TensorFlow name: any use raises."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            del args, kwargs
            raise NotImplementedError(message)

        def __init_subclass__(cls, **kwargs: Any) -> None:
            raise NotImplementedError(message)

    Unavailable.__name__ = Unavailable.__qualname__ = name
    Unavailable.__module__ = f"{_PACKAGE}.{module}"
    return Unavailable


class _StandIn(types.ModuleType):
    """A removed module: its names are classes that raise when used."""

    def __init__(self, module: str, piece: str) -> None:
        super().__init__(f"{_PACKAGE}.{module}", f"Stand-in: {piece} (removed in TF 2.16).")
        self._module, self._piece = module, piece

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _unavailable(self._module, name, self._piece)
        setattr(self, name, value)
        return value


def install() -> None:
    """Registers the stand-ins where TensorFlow 2.15 had the modules (idempotent)."""
    from tensorflow.python import tpu  # Late: loads TensorFlow.

    for module, piece in _MODULES.items():
        name = f"{_PACKAGE}.{module}"
        if name not in sys.modules:
            sys.modules[name] = _StandIn(module, piece)
        setattr(tpu, module, sys.modules[name])
