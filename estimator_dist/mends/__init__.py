"""Every change estimator_dist makes to TensorFlow and Estimator, and every read of their
private code: one module per defect, listed in ``registry.MENDS``.

``registry`` says for each mend the TensorFlow defect, the test that shows it, what it
changes, whether it is process-wide, per strategy or per Estimator, and how to turn it
off (``ESTIMATOR_DIST_MENDS_OFF``). ``installed()`` lists what this process installed.
``internals`` holds the reads of TensorFlow's private modules that change nothing.
Nothing outside this folder imports ``tensorflow.python`` or ``tensorflow_estimator.python``
(``tests/estimator_dist/mends/test_registry.py`` checks it). Imports no TensorFlow.
"""
from estimator_dist.mends.registry import (MENDS, OFF_VARIABLE, applies, apply, install_for,
                                           install_on_import, installed, require,
                                           tensorflow_release, turned_off, version_fault)

__all__ = ["MENDS", "OFF_VARIABLE", "applies", "apply", "install_for", "install_on_import",
           "installed", "require", "tensorflow_release", "turned_off", "version_fault"]
