"""The ``estimator`` API name of TensorFlow's export decorator, which TensorFlow 2.16 removed.

Every public tensorflow-estimator 2.15 symbol is decorated with ``estimator_export``, a
subclass of TensorFlow's ``tf_export.api_export`` that passes
``api_name=tf_export.ESTIMATOR_API_NAME``; the decorator stores the exported names in
per-API attributes looked up in ``tf_export.API_ATTRS`` / ``API_ATTRS_V1``. TensorFlow 2.16
dropped the name and its two table rows, so the first decorated class fails
(``AttributeError: ... has no attribute 'ESTIMATOR_API_NAME'``). This puts the name and
the rows back, with 2.15's attribute names, so the decorator records what it did there.
"""
from __future__ import annotations

from tensorflow.python.util import tf_export

API_NAME = "estimator"


def install() -> None:
    """Registers the ``estimator`` API with ``tf_export`` (idempotent)."""
    attributes = tf_export._Attributes
    tf_export.ESTIMATOR_API_NAME = API_NAME
    tf_export.API_ATTRS.setdefault(
        API_NAME, attributes("_estimator_api_names", "_estimator_api_constants"))
    tf_export.API_ATTRS_V1.setdefault(
        API_NAME, attributes("_estimator_api_names_v1", "_estimator_api_constants_v1"))
