"""The TensorFlow releases the mends run on, and on which of them each is installed.

The package runs on TensorFlow 2.15 (``LEGACY``, the last with ``tf.estimator``) and
2.16-2.21 (``CURRENT``), with tensorflow-estimator 2.15. Each mend lists the releases it
was checked on (``Mend.tensorflow``) and is installed on those only (``applies``); a
release the package was never checked on is refused in one line (``version_fault``), not
discovered mid-run. The release is read without importing TensorFlow when it is not
imported yet (``tensorflow_release``).
"""
from __future__ import annotations

import importlib.metadata
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from estimator_dist.mends.catalogue import Mend

# The environment variable that turns mends off (``registry.turned_off``); a refusal
# names it as the way out.
OFF_VARIABLE = "ESTIMATOR_DIST_MENDS_OFF"
# The TensorFlow releases the package runs on: the last with tf.estimator, and those after.
LEGACY = ("2.15",)
CURRENT = ("2.16", "2.17", "2.18", "2.19", "2.20", "2.21")
SUPPORTED = LEGACY + CURRENT
# The one tensorflow-estimator there is for all of them.
ESTIMATOR_RELEASE = "2.15"
_TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu",
                             "tensorflow-intel")


def _versions() -> dict[str, str]:
    """The installed versions of TensorFlow's distributions and tensorflow-estimator."""
    found = {}
    for distribution in _TENSORFLOW_DISTRIBUTIONS + ("tensorflow-estimator",):
        try:
            found[distribution] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def _release(version: str) -> str:
    return ".".join(version.split(".")[:2])


def tensorflow_release() -> str | None:
    """The TensorFlow release in use, e.g. "2.21": the imported module's, else the installed
    distribution's (read without importing TensorFlow); None when none is installed."""
    module: Any = sys.modules.get("tensorflow")
    if getattr(module, "__version__", None):
        return _release(module.__version__)
    found = _versions()
    installed = [found[d] for d in _TENSORFLOW_DISTRIBUTIONS if found.get(d)]
    if not installed:
        return None
    return _release(max(installed, key=lambda v: tuple(int(p) for p in _release(v).split("."))))


def version_fault(mend: Mend | None = None) -> str | None:
    """Why no mend (or ``mend``) may be installed with the versions present, or None: a
    TensorFlow or tensorflow-estimator release the package was not checked on."""
    release = tensorflow_release()
    turn_off = mend.turn_off if mend else f"{OFF_VARIABLE}=all"
    if release is not None and release not in SUPPORTED:
        what = f"mend {mend.name!r}" if mend else "the package's mends"
        return (f"tensorflow must be one of {SUPPORTED[0]}, {CURRENT[0]}-{CURRENT[-1]} for "
                f"{what} (checked on those releases only; turn it off with {turn_off}). "
                f"Received: tensorflow={release}")
    estimator = _versions().get("tensorflow-estimator")
    if estimator is not None and _release(estimator) != ESTIMATOR_RELEASE:
        return (f"tensorflow-estimator must be {ESTIMATOR_RELEASE}.x (the last release, "
                f"which the mends were checked with; turn them off with {turn_off}). "
                f"Received: tensorflow-estimator={estimator}")
    return None


def applies(mend: Mend) -> bool:
    """Whether ``mend`` is to be installed with the TensorFlow release in use (on a release
    the package was not checked on, installing it is refused: ``version_fault``)."""
    release = tensorflow_release()
    return release is None or release not in SUPPORTED or release in mend.tensorflow
