"""The interpreter-start hook of estimator-dist: ``tf.estimator`` on TensorFlow 2.16 and later
in a program that never imports ``estimator_dist``.

``estimator_dist_startup.pth``, which ``pip install`` puts into site-packages beside this
module, calls ``install()`` as the interpreter starts. It imports nothing and puts one
finder on ``sys.meta_path``; the first time ``tensorflow`` or ``tensorflow_estimator`` is
imported, the finder steps aside and, unless that TensorFlow ships Estimator itself (2.15
and earlier have ``tensorflow/python/estimator/``), imports ``estimator_dist``, whose
import hook installs the mends that give TensorFlow ``tf.estimator`` back
(docs/mends.md). ``ESTIMATOR_DIST_STARTUP_HOOK=0`` turns it off. It changes nothing else:
the strategies still need ``estimator_dist.make_run_config``.
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself costs 20 ms at every start: imported for mypy only.
if TYPE_CHECKING:
    from typing import Any

VARIABLE = "ESTIMATOR_DIST_STARTUP_HOOK"
PTH = "estimator_dist_startup.pth"
_TRIGGERS = ("tensorflow", "tensorflow_estimator")


def turned_off() -> bool:
    """Whether ``ESTIMATOR_DIST_STARTUP_HOOK=0`` turns the hook off."""
    return os.environ.get(VARIABLE, "").strip() == "0"


def ships_estimator() -> bool:
    """Whether the TensorFlow installed ships Estimator itself (2.15 and earlier), read
    from its folder without importing it."""
    import importlib.machinery

    spec = importlib.machinery.PathFinder.find_spec("tensorflow")
    folders = list(spec.submodule_search_locations or []) if spec else []
    return any(os.path.isdir(os.path.join(folder, "python", "estimator")) for folder in folders)


class _Finder:
    """Hands ``tensorflow``'s first import to ``estimator_dist`` (then steps aside)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _TRIGGERS or self not in sys.meta_path:
            return None
        sys.meta_path.remove(self)
        if ships_estimator():
            return None
        import importlib.util

        try:
            import estimator_dist  # noqa: F401  (its import hook installs the mends)
        except Exception as error:  # Any failure: TensorFlow still imports, as it would.
            print(f"estimator_dist_startup: estimator_dist did not import, so tf.estimator is "
                  f"not restored (turn this hook off with {VARIABLE}=0). Received: "
                  f"{type(error).__name__}: {error}", file=sys.stderr)
            return None
        return importlib.util.find_spec(fullname)


def install() -> None:
    """Puts the finder on ``sys.meta_path`` (what the .pth file calls); nothing when turned
    off, when TensorFlow is imported already, or when it is there already."""
    if turned_off() or "tensorflow" in sys.modules or active():
        return
    sys.meta_path.insert(0, _Finder())


def active() -> bool:
    """Whether the finder is waiting for TensorFlow's first import in this process."""
    return any(isinstance(finder, _Finder) for finder in sys.meta_path)
