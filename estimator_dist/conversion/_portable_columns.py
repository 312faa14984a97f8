"""A canned Estimator's feature columns and head from Keras 3's own layers and ops only.

``to_keras(estimator, portable=True)`` builds with these functions instead of
``_column_layers``: the model's config names nothing but Keras classes, so
``keras.models.load_model`` rebuilds it in a process that imports neither
``estimator_dist`` nor ``tf_keras``. Each function takes Keras tensors of the raw features
and gives Keras tensors; the columns' ops are the same as ``tf.feature_column``'s:

* ``Hashing`` is ``tf.strings.to_hash_bucket_fast`` (integers as strings, as the hash
  columns take them); with ``mask_value`` it tells which values were given.
* ``StringLookup`` / ``IntegerLookup`` with one out-of-vocabulary index find a
  vocabulary's values; the others take a ``Hashing`` bucket past the vocabulary, or the
  column's ``default_value``.
* ``Discretization`` is ``Bucketize``; ``HashedCrossing`` is ``tf.sparse.cross_hashed``
  with its default key.
* An embedding table (and a linear part's weights) is an ``Embedding`` looked up once per
  distinct id, then spread to the examples: its gradient holds each row once, the
  examples' updates summed, as TensorFlow's optimizers apply a sparse step (Keras's would
  square the rows as they come).

What the package's layers take and these do not: sparse or ragged features (pad a
multivalent feature to ``[batch, k]`` with ``''`` or ``-1``, the values a column drops
from a dense feature), a crossed column's ``hash_key`` and a crossed column over features
of more than one value per example (``check`` refuses them).
"""
from __future__ import annotations

from typing import Any

import keras
from keras import layers

from estimator_dist.conversion._column_layers import IGNORED, dense_width, numeric_width
from estimator_dist.conversion.feature_columns import InexpressibleColumn, Spec, raw_keys

# Keras 3's; Keras 2 (TensorFlow 2.15) has none, and ``canned`` refuses it before a build.
ops: Any = getattr(keras, "ops", None)
Tensors = dict[str, Any]


def check(spec: Spec) -> None:
    """Raises ``InexpressibleColumn`` for what Keras's own layers cannot compute exactly:
    a crossed column's ``hash_key`` (``HashedCrossing`` has none)."""
    if spec["kind"] == "crossed" and spec["hash_key"] is not None:
        raise InexpressibleColumn(
            f"feature column {spec['name']!r} must cross with TensorFlow's default hash key "
            f"for a portable Keras model (Keras's HashedCrossing takes no other); leave "
            f"portable off to keep it. Received: hash_key={spec['hash_key']}")
    if spec["kind"] == "crossed":
        for leaf in spec["keys"]:
            if leaf["kind"] == "bucketized" and numeric_width(leaf["source"]) != 1:
                raise InexpressibleColumn(
                    f"feature column {spec['name']!r} must cross one value per example "
                    f"for a portable Keras model (Keras's HashedCrossing crosses no more); "
                    f"leave portable off to keep it. Received: {leaf['name']!r} of shape "
                    f"{tuple(leaf['source']['shape'])}")
    for inner in (spec.get("categorical"), *spec.get("keys", ())):
        if inner is not None:
            check(inner)


def crossed_keys(spec: Spec) -> set[str]:
    """The raw features a spec crosses: their inputs take one value per example."""
    if spec["kind"] == "crossed":
        return set(raw_keys(spec))
    inner = spec.get("categorical")
    return crossed_keys(inner) if inner is not None else set()


def _numeric(spec: Spec, features: Tensors) -> Any:
    return ops.reshape(ops.cast(features[spec["key"]], "float32"), (-1, numeric_width(spec)))


def _given(spec: Spec, features: Tensors) -> tuple[Any, Any]:
    """(values, present): a dense feature's values and where they are not the ignored
    value ('' or -1)."""
    values = features[spec["key"]]
    dtype = "string" if values.dtype == "string" else "int64"
    present = layers.Hashing(2, mask_value=IGNORED[dtype])(values)
    return values, ops.cast(present, "bool")


def _bucket_ids(spec: Spec, features: Tensors) -> Any:
    """Each value's bucket, offset by its dimension's (as a bucketized column's ids)."""
    values = _numeric(spec["source"], features)
    buckets = ops.cast(layers.Discretization(bin_boundaries=spec["boundaries"])(values), "int64")
    offsets = ops.arange(numeric_width(spec["source"]), dtype="int64") * (
        len(spec["boundaries"]) + 1)
    return buckets + offsets


def _vocabulary_ids(spec: Spec, features: Tensors) -> tuple[Any, Any]:
    values, present = _given(spec, features)
    lookup = layers.StringLookup if spec["dtype"] == "string" else layers.IntegerLookup
    index = ops.cast(lookup(vocabulary=spec["vocabulary"], num_oov_indices=1,
                            mask_token=None)(values), "int64")
    if spec["num_oov_buckets"]:
        missing = ops.cast(layers.Hashing(spec["num_oov_buckets"])(values), "int64") + len(
            spec["vocabulary"])
    else:
        missing = ops.zeros_like(index) + spec["default_value"]
    return ops.where(index > 0, index - 1, missing), present


def _identity_ids(spec: Spec, features: Tensors) -> tuple[Any, Any]:
    """The ids; one out of range takes the default, or without one is no id (the
    Estimator refuses such input)."""
    values, present = _given(spec, features)
    values = ops.cast(values, "int64")
    outside = ops.logical_or(values < 0, values >= spec["num_buckets"])
    if spec["default_value"] is None:
        return values, ops.logical_and(present, ops.logical_not(outside))
    return ops.where(outside, spec["default_value"], values), present


def _crossed_ids(spec: Spec, features: Tensors) -> tuple[Any, Any]:
    """The crossed id of each example's one value per leaf; none where a leaf has none."""
    inputs, present = [], None
    for leaf in spec["keys"]:
        if leaf["kind"] == "raw":
            values, given = _given(leaf, features)
        else:
            values, given, _ = categorical_ids(leaf, features)
        inputs.append(values)
        present = given if present is None else ops.logical_and(present, given)
    ids = layers.HashedCrossing(spec["num_buckets"])(inputs)
    return ops.reshape(ops.cast(ids, "int64"), (-1, 1)), present


def categorical_ids(spec: Spec, features: Tensors) -> tuple[Any, Any, Any]:
    """(ids, present, weights or None), each [batch, n], of a categorical spec."""
    kind = spec["kind"]
    if kind == "weighted":
        ids, present, _ = categorical_ids(spec["categorical"], features)
        return ids, present, ops.cast(features[spec["weight_key"]], "float32")
    if kind == "bucketized":
        ids = _bucket_ids(spec, features)
        return ids, ops.ones_like(ids, dtype="bool"), None
    if kind == "hash":
        values, present = _given(spec, features)
        return ops.cast(layers.Hashing(spec["num_buckets"])(values), "int64"), present, None
    ids_of = {"vocabulary": _vocabulary_ids, "identity": _identity_ids,
              "crossed": _crossed_ids}[kind]
    ids, present = ids_of(spec, features)
    return ids, present, None


def _rows(table: layers.Embedding, ids: Any) -> Any:
    """``table``'s rows of ``ids`` [batch, n] → [batch, n, d], each distinct id looked up
    once (so its gradient sums the examples' updates of that row)."""
    distinct, positions = ops.unique(ids, sorted=False, return_inverse=True)
    return ops.take(table(distinct), positions, axis=0)


def _clipped(rows: Any, max_norm: float) -> Any:
    """``tf.clip_by_norm(rows, max_norm, axes=[-1])``, as the Estimator's lookup clips."""
    squares = ops.sum(rows * rows, axis=-1, keepdims=True)
    positive = squares > 0
    norm = ops.where(positive, ops.sqrt(ops.where(positive, squares, 1.0)), squares)
    return rows * max_norm / ops.maximum(norm, max_norm)


def combine(table: layers.Embedding, spec: Spec, features: Tensors, combiner: str,
            max_norm: float | None = None) -> Any:
    """``safe_embedding_lookup_sparse`` of ``table`` by a categorical spec's ids: invalid
    ids pruned, and weights <= 0 unless the combiner is ``sum``; an empty row zero."""
    ids, present, weights = categorical_ids(spec, features)
    valid = ops.logical_and(present, ids >= 0)
    if weights is None:
        weights = ops.ones_like(ids, dtype="float32")
    elif combiner != "sum":
        valid = ops.logical_and(valid, weights > 0)
    weights = ops.where(valid, weights, 0.0)
    rows = _rows(table, ops.where(valid, ids, 0))
    if max_norm is not None:
        rows = _clipped(rows, max_norm)
    total = ops.sum(rows * ops.expand_dims(weights, -1), axis=1)
    if combiner == "mean":
        return ops.divide_no_nan(total, ops.sum(weights, axis=1, keepdims=True))
    if combiner == "sqrtn":
        return ops.divide_no_nan(total, ops.sqrt(ops.sum(weights * weights, axis=1,
                                                         keepdims=True)))
    return total


def _indicator(spec: Spec, features: Tensors) -> Any:
    ids, present, weights = categorical_ids(spec, features)
    counts = ops.cast(present, "float32")
    if weights is not None:
        counts = counts * weights
    hot = ops.one_hot(ids, spec["num_buckets"], dtype="float32")
    return ops.sum(hot * ops.expand_dims(counts, -1), axis=1)


def dense(spec: Spec, features: Tensors, table: layers.Embedding | None = None) -> Any:
    """One feature column of a DNN's input layer; an embedding's ``table`` is given."""
    kind = spec["kind"]
    if kind == "numeric":
        output = _numeric(spec, features)
    elif kind == "bucketized":
        output = ops.one_hot(_bucket_ids(spec, features), len(spec["boundaries"]) + 1)
    elif kind == "indicator":
        output = _indicator(spec["categorical"], features)
    else:
        output = combine(table, spec["categorical"], features, spec["combiner"],
                         spec["max_norm"])
    return ops.reshape(output, (-1, dense_width(spec)))


def linear_part(spec: Spec, features: Tensors, weights: Any, combiner: str) -> Any:
    """One column's part of a linear model's logits: ``weights`` is a ``Dense`` without
    bias for a numeric column, an ``Embedding`` for a categorical one."""
    if spec["kind"] == "numeric":
        return weights(_numeric(spec, features))
    return combine(weights, spec, features, combiner)


def linear_logits(parts: list[Any], bias: layers.Dense) -> Any:
    """The parts summed plus ``bias``: a ``Dense`` without bias of one input, 1, whose
    kernel is the Estimator's ``bias_weights`` (its gradient the batch's sum)."""
    ones = ops.ones_like(parts[0][:, :1])
    return layers.Add()([*parts, bias(ones)])


def classifier_head(logits: Any, n_classes: int, label_vocabulary: list[str] | None) -> Tensors:
    """A classifier head's predictions, as the Estimator's head computes them (two classes:
    one logit, ``softmax([0, logit])``)."""
    outputs = {"logits": logits}
    if n_classes == 2:
        outputs["logistic"] = ops.sigmoid(logits)
        logits = ops.concatenate([ops.zeros_like(logits), logits], axis=-1)
    outputs["probabilities"] = ops.softmax(logits, axis=-1)
    class_ids = ops.expand_dims(ops.cast(ops.argmax(logits, axis=-1), "int64"), -1)
    all_class_ids = ops.cast(ops.zeros_like(logits), "int32") + ops.arange(n_classes,
                                                                          dtype="int32")
    names = label_vocabulary or [str(i) for i in range(n_classes)]
    lookup = layers.StringLookup(vocabulary=names, num_oov_indices=0, mask_token=None,
                                 invert=True)
    outputs.update(class_ids=class_ids, classes=lookup(class_ids), all_class_ids=all_class_ids,
                   all_classes=lookup(all_class_ids))
    return outputs


def inputs(dtypes: dict[str, str], shapes: dict[str, tuple[int, ...]],
           crossed: set[str]) -> Tensors:
    """One dense input per raw feature: a numeric column's of its shape, a crossed
    feature's [batch, 1], others [batch, k]."""
    return {key: keras.Input(shape=shapes.get(key, (1,) if key in crossed else (None,)),
                             dtype=dtype, name=key)
            for key, dtype in sorted(dtypes.items())}
