"""Sharded, static-shape tf.data input functions for Estimators.

Imports nothing from ``estimator_dist``: take this package alone into any codebase.
"""
from input_fns.arrays import from_arrays

__all__ = ["from_arrays"]
