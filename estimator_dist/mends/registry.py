"""How the mends are applied: explicitly, once, and one way.

``apply(name, target, **options)`` installs a process-wide mend (its module's
``install(**options)``) or applies a per-strategy or per-Estimator one to ``target`` (its
module's ``apply(target, **options)``); ``asked="..."`` says that the caller needs it, so
that a mend turned off is refused there rather than left out. ``install_for(kind)``
(called by ``make_run_config``) applies the process-wide ones a strategy's kind needs. A
process-wide mend that needs code of a layer above the mends is given it by
``provide(name, **needs)`` (``estimator_dist/__init__.py`` does it), never by an import
that runs up. ``installed()`` lists what this process installed. The mends themselves are
listed in ``catalogue``; ``releases`` says on which TensorFlow releases each is installed
(and refuses a release never checked); ``import_hook`` installs the ones that give
TensorFlow 2.16 and later ``tf.estimator`` back.

Turn mends off with ``ESTIMATOR_DIST_MENDS_OFF=name,name`` (or ``all``) in the
environment: a mend turned off is neither installed nor applied, and TensorFlow's own
behaviour applies (``all`` leaves on the mends that put back what TensorFlow 2.16 removed).
A name that is no mend is refused where a mend is applied, except for the import mends,
which leave it out (``import_hook`` says so in one line). Imports no TensorFlow until a
mend is installed.
"""
from __future__ import annotations

import importlib
import os
from typing import Any, Mapping

from estimator_dist.errors import UsageError
from estimator_dist.mends import releases
from estimator_dist.mends.catalogue import MENDS, NAMES, Mend, StrategyFacts
from estimator_dist.mends.releases import OFF_VARIABLE

_INSTALLED: dict[str, str] = {}  # name -> scope, in the order installed in this process.
_NEEDS: dict[str, dict[str, Any]] = {}  # name -> what provide() gave its install().


def turned_off(environ: Mapping[str, str] | None = None, *,
               known_only: bool = False) -> frozenset[str]:
    """The names ``ESTIMATOR_DIST_MENDS_OFF`` turns off: those it lists, and for ``all``
    every mend but the ones that put back what TensorFlow 2.16 removed (``Mend.restores``,
    turned off by name only).

    Args:
      environ: the environment (``os.environ`` by default).
      known_only: leave out names that are no mend instead of refusing them (the import
        mends, installed where no caller could handle a refusal: ``unknown_off_names``
        says what is left out).

    Raises:
      UsageError: a name that is no mend, listing the valid ones.
    """
    environ = os.environ if environ is None else environ
    names = {n.strip() for n in environ.get(OFF_VARIABLE, "").split(",") if n.strip()}
    unknown = sorted(names - set(NAMES) - {"all"})
    if unknown and not known_only:
        raise UsageError(f"{OFF_VARIABLE} must list mends among all, {', '.join(NAMES)}. "
                         f"Received: {OFF_VARIABLE}={environ[OFF_VARIABLE]!r}")
    if "all" in names:
        names |= {name for name, mend in MENDS.items() if not mend.restores}
    return frozenset(names & set(NAMES))


def unknown_off_names(environ: Mapping[str, str] | None = None) -> str | None:
    """The refusal of ``ESTIMATOR_DIST_MENDS_OFF`` in one line when it lists a name that is
    no mend, else None."""
    try:
        turned_off(environ)
    except UsageError as error:
        return str(error)
    return None


def _checked(name: str) -> Mend:
    mend = MENDS[name]
    fault = releases.version_fault(mend)
    if fault:
        raise UsageError(fault)
    return mend


def install_for(kind: StrategyFacts) -> None:
    """Installs the process-wide mends a strategy of ``kind`` needs by its facts
    (``Mend.needed_by``): ``kind`` is a ``StrategyKind``, read by the facts' names.
    Idempotent.

    Raises:
      UsageError: TensorFlow of a release the package was not checked on (turn the mends
        off to run).
    """
    for mend in MENDS.values():
        if mend.scope == "process" and mend.needed_by(kind):
            apply(mend.name)


def provide(name: str, **needs: Any) -> None:
    """Gives process-wide mend ``name`` what its ``install`` needs from a layer above the
    mends (e.g. the Estimator builder), for whenever it is installed."""
    _NEEDS[name] = needs


def _refused_off(name: str, asked: str) -> UsageError:
    return UsageError(f"{asked} needs mend {name!r}, which {OFF_VARIABLE} turns off: drop "
                      f"it from {OFF_VARIABLE} or ask for less. Received: {asked}")


def apply(name: str, target: Any = None, *, asked: str | None = None, **options: Any) -> bool:
    """Applies mend ``name``: installs it when it is process-wide (scope "import" or
    "process"), else applies it to ``target`` (a strategy, an Estimator, a config or hook),
    with ``options``. Idempotent.

    Args:
      name: the mend.
      target: what a per-strategy or per-Estimator mend changes.
      asked: what asked for the mend, e.g. "steps_per_run=4", when the caller cannot do
        without it: a mend turned off is then refused instead of left out.
      **options: passed on to the mend's ``install`` or ``apply``.

    Returns:
      True when applied; False when ``ESTIMATOR_DIST_MENDS_OFF`` turns it off or the
      TensorFlow in use does not need it.

    Raises:
      UsageError: a mend ``asked`` for is turned off; TensorFlow of a release the package
        was not checked on.
    """
    mend = MENDS[name]
    if name in turned_off(known_only=mend.scope == "import"):
        if asked is not None:
            raise _refused_off(name, asked)
        return False
    if not releases.applies(mend):
        return False
    _checked(name)
    module = importlib.import_module(mend.module)
    if mend.scope in ("import", "process"):
        module.install(**_NEEDS.get(name, {}), **options)
    else:
        module.apply(target, **options)
    _INSTALLED.setdefault(name, mend.scope)
    return True


def installed() -> tuple[str, ...]:
    """The mends this process installed or applied so far, in that order."""
    return tuple(_INSTALLED)
