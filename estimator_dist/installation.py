"""What was installed beside the package, as ``doctor`` reports it: the interpreter-start
hook, what TensorFlow 2.15 installed beside itself that current TensorFlow does not, and
TensorFlow distributions installed over one another. Read from the installed
distributions' metadata; imports no TensorFlow.
"""
from __future__ import annotations

import importlib.metadata
import os
import site
from typing import Callable, Mapping, Sequence

import estimator_dist_startup
from estimator_dist.mends import releases

# What TensorFlow 2.15 required beside itself, which 2.16+ does not, and what of Estimator
# code needs it (setup.py installs them on Python 3.12+).
COMPANIONS = {
    "tensorboard": "tf.summary.* in a model_fn, Estimator's own summaries",
    "tf-keras": "Keras 2: canned estimators, tf.compat.v1.layers, model_to_estimator",
}
# What TensorFlow 2.15 has of them itself.
_LEGACY_OWN = {"tf-keras": "TensorFlow 2.15's tf.keras is Keras 2"}


def _site_folders() -> list[str]:
    folders = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    return folders + [site.getusersitepackages()]


def startup_hook_file(folders: Sequence[str] | None = None) -> str | None:
    """The installed ``estimator_dist_startup.pth``, or None."""
    for folder in _site_folders() if folders is None else folders:
        path = os.path.join(folder, estimator_dist_startup.PTH)
        if os.path.isfile(path):
            return path
    return None


def startup_hook_state(folders: Sequence[str] | None = None) -> str:
    """The interpreter-start hook in one line: installed where, and what it does here."""
    path = startup_hook_file(folders)
    if path is None:
        return (f"not installed ({estimator_dist_startup.PTH} in no site-packages folder): a "
                "program imports estimator_dist for tf.estimator on TensorFlow 2.16+")
    if estimator_dist_startup.turned_off():
        return f"off ({estimator_dist_startup.VARIABLE}=0), installed as {path}"
    if estimator_dist_startup.ships_estimator():
        return f"steps aside (this TensorFlow ships tf.estimator), installed as {path}"
    return (f"on: tf.estimator in programs that never import estimator_dist, installed as "
            f"{path}")


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def companions(version: Callable[[str], str | None] = _version,
               release: str | None = None) -> dict[str, str]:
    """Each of ``COMPANIONS``: its version, or what goes missing without it (TensorFlow
    ``release``, by default the one installed, may have it itself)."""
    release = releases.tensorflow_release() if release is None else release
    found = {}
    for name, needs in COMPANIONS.items():
        own = _LEGACY_OWN.get(name) if release in releases.LEGACY else None
        found[name] = version(name) or (f"not needed: {own}" if own else
                                        f"not installed: {needs} fail")
    return found


def tensorflow_distributions_fault(
        packages: Mapping[str, Sequence[str]] | None = None) -> str | None:
    """One line when two distributions installed the one ``tensorflow/`` folder (e.g.
    ``tensorflow`` and ``tensorflow-cpu``: its files are then a mix of both), else None."""
    if packages is None:
        packages = importlib.metadata.packages_distributions()
    owners = sorted(set(packages.get("tensorflow", ())))
    if len(owners) < 2:
        return None
    versions = ", ".join(f"{name} {_version(name) or '?'}" for name in owners)
    return (f"tensorflow/ must come from one distribution: {versions} installed over one "
            f"another; pip uninstall {' '.join(owners)}, then install one (docs/install.md, "
            f"\"Libraries that pin an older TensorFlow\"). Received: {len(owners)} "
            "distributions")
