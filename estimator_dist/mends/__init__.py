"""Every change estimator_dist makes to TensorFlow and Estimator, and every read of their
private code: one module per defect, listed in ``catalogue.MENDS``.

``catalogue`` says for each mend the TensorFlow defect, the test that shows it, what it
changes, whether it is process-wide, per strategy or per Estimator, and how to turn it
off (``ESTIMATOR_DIST_MENDS_OFF``). A mend is applied one way, ``apply(name, target,
**options)``; ``install_on_import`` and ``install_for`` apply the process-wide ones of
an import and of a strategy, and ``provide`` hands a mend what it needs from a layer
above. ``installed()`` lists what this process installed. ``internals`` holds the reads
of TensorFlow's private code that change nothing. Nothing outside this folder reaches
into TensorFlow's private code (``tests/estimator_dist/test_private_names.py`` checks
it). Imports no TensorFlow.
"""
from estimator_dist.mends.catalogue import MENDS
from estimator_dist.mends.import_hook import install_on_import
from estimator_dist.mends.registry import apply, install_for, installed, provide, turned_off
from estimator_dist.mends.releases import (OFF_VARIABLE, applies, tensorflow_release,
                                           version_fault)

__all__ = ["MENDS", "OFF_VARIABLE", "applies", "apply", "install_for", "install_on_import",
           "installed", "provide", "tensorflow_release", "turned_off", "version_fault"]
