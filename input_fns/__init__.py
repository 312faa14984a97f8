"""Sharded, static-shape tf.data input functions for Estimators.

Every ``from_*`` and ``time_series_*`` function returns an ``input_fn(input_context=None)``:
a plain Estimator input_fn, and under a distribution strategy one that reads only its
input pipeline's shard and yields per-replica batches of a global ``batch_size``.

Imports nothing from ``estimator_dist``: take this package alone into any codebase.
"""
from input_fns.arrays import from_arrays
from input_fns.checks import check_files
from input_fns.csv_files import from_csv
from input_fns.files import from_files
from input_fns.numpy_io import numpy_input_fn, pandas_input_fn
from input_fns.tfrecords import from_tfrecord, write_tfrecords
from input_fns.time_series import time_series_streams, time_series_windows

__all__ = [
    "check_files",
    "from_arrays",
    "from_csv",
    "from_files",
    "from_tfrecord",
    "numpy_input_fn",
    "pandas_input_fn",
    "time_series_streams",
    "time_series_windows",
    "write_tfrecords",
]
