"""The input_fn refusals and warnings name the user's function, as Estimator hands it to
a strategy (``lambda input_context: self._call_input_fn(input_fn, mode, input_context)``)."""
import re

import numpy as np
import pytest
import tensorflow as tf

from estimator_dist.distribute import input_checks


def input_fn_tfrecord(batch_size):
    """A library's input helper: returns an inner function (deepctr's habit)."""

    def input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(np.zeros([16, 2], np.float32))
        return tf.compat.v1.data.make_one_shot_iterator(dataset.batch(batch_size)).get_next()

    return input_fn


def _as_estimator_hands_it(input_fn):
    return lambda input_context: input_fn()


def _place(function):
    code = function.__code__
    return re.escape(f"{function.__module__}.{function.__qualname__} "
                     f"({code.co_filename}:{code.co_firstlineno})")


def test_refusal_names_the_library_helpers_inner_function():
    helper = input_fn_tfrecord(4)
    checked = input_checks.checked_input_fn(_as_estimator_hands_it(helper), num_replicas=2)
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"^input_fn must return a tf\.data\.Dataset under "
                                             r"a distribution strategy\. Received: \w*Tensor of "
                                             rf"tensors from {_place(helper)}; return the"):
            checked(tf.distribute.InputContext(1, 0, 2))


def test_whole_batch_warning_names_the_input_fn(monkeypatch):
    monkeypatch.setattr(input_checks, "_warned", set())

    def batches():
        return tf.data.Dataset.from_tensor_slices(np.zeros([16, 2], np.float32)).batch(4)

    checked = input_checks.checked_input_fn(_as_estimator_hands_it(batches), num_replicas=2)
    with pytest.warns(input_checks.GlobalBatchWarning,
                      match=rf"^input_fn {_place(batches)} does not use input_context"):
        checked(tf.distribute.InputContext(1, 0, 2))
