"""Keras layers that compute a canned Estimator's feature columns and heads exactly.

Each layer holds one column's spec (``feature_columns``) and computes it from the raw
features with the ops ``tf.feature_column`` uses, so a converted model's outputs equal the
Estimator's:

* ``DenseColumn``: one column of a DNN's input layer (numeric, bucketized one-hot,
  indicator, embedding with its ``embedding_weights``).
* ``LinearColumn``: one column's part of a linear model's logits (its ``weights``: a
  matmul of a numeric column, a sparse sum of a categorical column's rows).
* ``LinearBias``: the sum of the parts and ``bias_weights``.
* ``ClassifierHead``: logits → ``logits``, ``probabilities``, ``class_ids``, ``classes``,
  ``all_class_ids``, ``all_classes`` (and ``logistic`` for two classes), as the
  Estimator's head predicts them.

Raw features are [batch] or [batch, k] tensors, or, for a categorical column's feature,
``tf.SparseTensor`` or ``tf.RaggedTensor`` (a ``tf.Example``'s variable-length feature,
a multivalent input). As ``tf.feature_column`` does for dense input, a categorical column
drops the empty string (and -1 of an integer feature) before it looks values up; so does
a crossed column's raw key, as an Estimator export parsing ``tf.Example`` strings sees no
value where the features had none. A sparse or ragged feature's values are all taken, as
``tf.feature_column`` takes a ``tf.SparseTensor``'s. An id is
"present" where a value was given and "valid" where it is also in range (a vocabulary's
``default_value=-1``): embeddings and linear weights combine the valid ids (and, but for
the ``sum`` combiner, only weights above 0), crosses hash every present id. Registered
with Keras (package ``estimator_dist``), so ``load_model`` rebuilds them where this module
is imported.
"""
from __future__ import annotations

import math
from typing import Any

import keras
import tensorflow as tf

from estimator_dist.conversion.feature_columns import Spec

_PACKAGE = "estimator_dist"
# What a categorical column drops from a dense feature, by dtype.
IGNORED = {"string": "", "int64": -1}


def _as_2d(value: Any) -> tf.Tensor:
    value = tf.convert_to_tensor(value)
    if value.shape.rank == 1:
        return tf.expand_dims(value, -1)
    if value.shape.rank == 2:
        return value
    return tf.reshape(value, [tf.shape(value)[0], -1])


def _multivalent(value: Any) -> bool:
    return isinstance(value, (tf.SparseTensor, tf.RaggedTensor))


def _padded(value: tf.SparseTensor | tf.RaggedTensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(values, given), each [batch, k]: a sparse or ragged feature padded (with '', 0),
    and where it holds a value."""
    if isinstance(value, tf.RaggedTensor):
        value = value.to_sparse()
    if value.shape.rank != 2:
        value = tf.sparse.reshape(value, tf.stack([value.dense_shape[0], -1]))
    given = tf.SparseTensor(value.indices, tf.ones_like(value.values, dtype=tf.bool),
                            value.dense_shape)
    return tf.sparse.to_dense(value), tf.sparse.to_dense(given, default_value=False)


def _typed(value: tf.Tensor, dtype: str) -> tf.Tensor:
    return value if value.dtype == tf.string else tf.cast(value, dtype)


def _feature(features: dict[str, Any], key: str, dtype: str) -> tf.Tensor:
    value = features[key]
    return _typed(_padded(value)[0] if _multivalent(value) else _as_2d(value), dtype)


def _numeric(spec: Spec, features: dict[str, Any]) -> tf.Tensor:
    return _feature(features, spec["key"], "float32")


def _bucket_ids(spec: Spec, features: dict[str, Any]) -> tf.Tensor:
    """The bucket of each value, without the per-dimension offset."""
    values = _numeric(spec["source"], features)
    return tf.cast(tf.raw_ops.Bucketize(input=values, boundaries=spec["boundaries"]), tf.int64)


def _hashed(values: tf.Tensor, buckets: int) -> tf.Tensor:
    strings = values if values.dtype == tf.string else tf.strings.as_string(values)
    return tf.strings.to_hash_bucket_fast(strings, buckets)


def _given(spec: Spec, features: dict[str, Any]) -> tuple[tf.Tensor, tf.Tensor]:
    """(values, present): the raw values and where they were given. As the Estimator
    takes them: every value of a sparse (or ragged) feature, '' and -1 too; a dense
    feature's values but the ignored one."""
    dtype = spec.get("dtype", "int64")
    if _multivalent(features[spec["key"]]):
        values, given = _padded(features[spec["key"]])
        return _typed(values, dtype), given
    values = _feature(features, spec["key"], dtype)
    ignored = IGNORED["string" if values.dtype == tf.string else "int64"]
    return values, tf.not_equal(values, ignored)


def _vocabulary_ids(spec: Spec, features: dict[str, Any]) -> tuple[tf.Tensor, tf.Tensor]:
    values, present = _given(spec, features)
    vocabulary = tf.constant(spec["vocabulary"], dtype=values.dtype)
    matches = tf.equal(tf.expand_dims(values, -1), vocabulary)
    index = tf.argmax(tf.cast(matches, tf.int32), axis=-1, output_type=tf.int64)
    if spec["num_oov_buckets"]:
        missing = _hashed(values, spec["num_oov_buckets"]) + len(spec["vocabulary"])
    else:
        missing = tf.fill(tf.shape(values), tf.constant(spec["default_value"], tf.int64))
    return tf.where(tf.reduce_any(matches, axis=-1), index, missing), present


def _identity_ids(spec: Spec, features: dict[str, Any]) -> tuple[tf.Tensor, tf.Tensor]:
    values, present = _given(spec, features)
    outside = tf.logical_or(values < 0, values >= spec["num_buckets"])
    if spec["default_value"] is None:
        check = tf.debugging.Assert(
            tf.logical_not(tf.reduce_any(tf.logical_and(present, outside))),
            [f"feature {spec['key']!r} must be in [0, {spec['num_buckets']}) (column "
             f"{spec['name']!r} has no default_value)", values])
        with tf.control_dependencies([check]):
            return tf.identity(values), present
    return tf.where(outside, tf.constant(spec["default_value"], tf.int64), values), present


def _sparse(values: tf.Tensor, present: tf.Tensor) -> tf.SparseTensor:
    indices = tf.where(present)
    return tf.SparseTensor(indices, tf.gather_nd(values, indices),
                           tf.shape(values, out_type=tf.int64))


def _crossed_ids(spec: Spec, features: dict[str, Any]) -> tuple[tf.Tensor, tf.Tensor]:
    inputs = []
    for leaf in spec["keys"]:
        if leaf["kind"] == "raw":
            inputs.append(_sparse(*_given(leaf, features)))
        else:
            ids, present, _ = categorical_ids(leaf, features)
            inputs.append(_sparse(ids, present))
    crossed = tf.sparse.cross_hashed(inputs, num_buckets=spec["num_buckets"],
                                     hash_key=spec["hash_key"])
    return tf.sparse.to_dense(crossed, default_value=-1), tf.sparse.to_dense(
        tf.SparseTensor(crossed.indices, tf.ones_like(crossed.values, dtype=tf.bool),
                        crossed.dense_shape), default_value=False)


def categorical_ids(spec: Spec, features: dict[str, Any]
                    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor | None]:
    """(ids, present, weights or None), each [batch, n], of a categorical spec."""
    kind = spec["kind"]
    if kind == "weighted":
        ids, present, _ = categorical_ids(spec["categorical"], features)
        return ids, present, _feature(features, spec["weight_key"], "float32")
    if kind == "bucketized":
        buckets = _bucket_ids(spec, features)
        offsets = tf.range(tf.shape(buckets, out_type=tf.int64)[1]) * (
            len(spec["boundaries"]) + 1)
        return buckets + offsets, tf.ones_like(buckets, dtype=tf.bool), None
    if kind == "hash":
        values, present = _given(spec, features)
        return _hashed(values, spec["num_buckets"]), present, None
    ids_of = {"vocabulary": _vocabulary_ids, "identity": _identity_ids,
              "crossed": _crossed_ids}[kind]
    ids, present = ids_of(spec, features)
    return ids, present, None


@tf.custom_gradient
def _summed_rows(table: tf.Tensor) -> tuple[tf.Tensor, Any]:
    """``table`` whose gradient, when it is a row update (``tf.IndexedSlices``), holds each
    row once, its updates summed: what TensorFlow's optimizers apply before a sparse step.
    Keras 3's optimizers square the rows as they come, so a row met twice in a batch
    (a hash collision, a repeated id) would grow its accumulator by the sum of squares
    instead of the square of the sum."""
    def gradient(upstream: Any) -> Any:
        if not isinstance(upstream, tf.IndexedSlices):
            return upstream
        rows, positions = tf.unique(upstream.indices)
        values = tf.math.unsorted_segment_sum(upstream.values, positions, tf.size(rows))
        return tf.IndexedSlices(values, rows, upstream.dense_shape)

    return tf.identity(table), gradient


def combine(table: tf.Tensor, spec: Spec, features: dict[str, Any], combiner: str,
            max_norm: float | None = None) -> tf.Tensor:
    """``safe_embedding_lookup_sparse`` of ``table`` [num_buckets, d] by a categorical
    spec's ids: invalid ids pruned, and weights <= 0 unless the combiner is ``sum``; an
    empty row zero."""
    ids, present, weights = categorical_ids(spec, features)
    valid = tf.logical_and(present, ids >= 0)
    if weights is None:
        weights = tf.ones_like(ids, dtype=table.dtype)
    elif combiner != "sum":
        valid = tf.logical_and(valid, weights > 0)
    weights = tf.where(valid, tf.cast(weights, table.dtype), tf.zeros_like(weights))
    rows = tf.gather(_summed_rows(table), tf.where(valid, ids, tf.zeros_like(ids)))
    if max_norm is not None:
        rows = tf.clip_by_norm(rows, max_norm, axes=[-1])
    total = tf.reduce_sum(rows * tf.expand_dims(weights, -1), axis=1)
    if combiner == "mean":
        return tf.math.divide_no_nan(total, tf.reduce_sum(weights, 1, keepdims=True))
    if combiner == "sqrtn":
        norm = tf.sqrt(tf.reduce_sum(tf.square(weights), 1, keepdims=True))
        return tf.math.divide_no_nan(total, norm)
    return total


def _indicator(spec: Spec, features: dict[str, Any]) -> tf.Tensor:
    ids, present, weights = categorical_ids(spec, features)
    counts = tf.cast(present, tf.float32)
    if weights is not None:
        counts *= weights
    hot = tf.one_hot(ids, spec["num_buckets"], dtype=tf.float32)
    return tf.reduce_sum(hot * tf.expand_dims(counts, -1), axis=1)


def numeric_width(spec: Spec) -> int:
    """How many values a numeric spec reads per example."""
    return math.prod(spec["shape"])


def dense_width(spec: Spec) -> int:
    """The width of a dense spec's output, as the DNN's input layer concatenates it."""
    kind = spec["kind"]
    if kind == "numeric":
        return numeric_width(spec)
    if kind == "bucketized":
        return int(spec["num_buckets"])
    if kind == "indicator":
        return int(spec["categorical"]["num_buckets"])
    return int(spec["dimension"])


@keras.saving.register_keras_serializable(package=_PACKAGE)
class DenseColumn(keras.layers.Layer):
    """One feature column of a DNN's input layer."""

    def __init__(self, spec: Spec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.table = None
        if spec["kind"] == "embedding":
            self.table = self.add_weight(
                name="embedding_weights", initializer="zeros",
                shape=(spec["categorical"]["num_buckets"], spec["dimension"]))

    def call(self, features: dict[str, Any]) -> tf.Tensor:
        spec, kind = self.spec, self.spec["kind"]
        if kind == "numeric":
            dense = _numeric(spec, features)
        elif kind == "bucketized":
            dense = tf.one_hot(_bucket_ids(spec, features), len(spec["boundaries"]) + 1)
        elif kind == "indicator":
            dense = _indicator(spec["categorical"], features)
        else:
            dense = combine(tf.convert_to_tensor(self.table), spec["categorical"], features,
                            spec["combiner"], spec["max_norm"])
        return tf.reshape(dense, [-1, dense_width(spec)])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "spec": self.spec}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SharedEmbeddingColumns(keras.layers.Layer):
    """The columns of a DNN's input layer that read one shared embedding table; called on
    the features, gives each column's output in the order of ``specs``."""

    def __init__(self, specs: list[Spec], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.specs = specs
        self.table = self.add_weight(
            name="embedding_weights", initializer="zeros",
            shape=(specs[0]["categorical"]["num_buckets"], specs[0]["dimension"]))

    def call(self, features: dict[str, Any]) -> list[tf.Tensor]:
        table = tf.convert_to_tensor(self.table)
        return [tf.reshape(combine(table, spec["categorical"], features, spec["combiner"],
                                   spec["max_norm"]), [-1, spec["dimension"]])
                for spec in self.specs]

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "specs": self.specs}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LinearColumn(keras.layers.Layer):
    """One feature column's part of a linear model's logits."""

    def __init__(self, spec: Spec, units: int, combiner: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.units, self.combiner = spec, units, combiner
        rows = numeric_width(spec) if spec["kind"] == "numeric" else spec["num_buckets"]
        self.weights_variable = self.add_weight(name="weights", initializer="zeros",
                                                shape=(rows, units))

    def call(self, features: dict[str, Any]) -> tf.Tensor:
        table = tf.convert_to_tensor(self.weights_variable)
        if self.spec["kind"] == "numeric":
            values = tf.reshape(_numeric(self.spec, features), [-1, numeric_width(self.spec)])
            return tf.matmul(values, table)
        return combine(table, self.spec, features, self.combiner)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "spec": self.spec, "units": self.units,
                "combiner": self.combiner}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LinearBias(keras.layers.Layer):
    """A linear model's logits: its columns' parts summed, plus ``bias_weights``."""

    def __init__(self, units: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.units = units
        self.bias = self.add_weight(name="bias_weights", initializer="zeros", shape=(units,))

    def call(self, parts: list[tf.Tensor]) -> tf.Tensor:
        return tf.add_n(list(parts)) + self.bias

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "units": self.units}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ClassifierHead(keras.layers.Layer):
    """A classifier head's predictions from its logits, as the Estimator's head computes
    them (two classes: one logit, ``softmax([0, logit])``)."""

    def __init__(self, n_classes: int, label_vocabulary: list[str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.n_classes, self.label_vocabulary = n_classes, label_vocabulary

    def call(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        outputs = {"logits": tf.identity(logits)}
        if self.n_classes == 2:
            outputs["logistic"] = tf.sigmoid(logits)
            logits = tf.concat([tf.zeros_like(logits), logits], axis=-1)
        outputs["probabilities"] = tf.nn.softmax(logits)
        class_ids = tf.expand_dims(tf.argmax(logits, axis=-1), -1)
        all_class_ids = tf.tile(tf.expand_dims(tf.range(self.n_classes), 0),
                                [tf.shape(logits)[0], 1])
        outputs.update(class_ids=class_ids, classes=self._names(class_ids),
                       all_class_ids=all_class_ids, all_classes=self._names(all_class_ids))
        return outputs

    def _names(self, class_ids: tf.Tensor) -> tf.Tensor:
        if self.label_vocabulary is None:
            return tf.strings.as_string(class_ids)
        return tf.gather(tf.constant(self.label_vocabulary), class_ids)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "n_classes": self.n_classes,
                "label_vocabulary": self.label_vocabulary}
