"""A canned Estimator's feature columns as plain specs the Keras layers rebuild exactly.

``dense_spec``, ``linear_spec`` and ``categorical_spec`` turn one ``tf.feature_column``
object into a JSON-able dict (its ``"kind"`` and the options that decide its output),
which ``_column_layers`` computes with the same TensorFlow ops as the column:
``tf.strings.to_hash_bucket_fast`` for hash buckets and out-of-vocabulary buckets,
``tf.sparse.cross_hashed`` with the column's ``hash_key`` for crosses, ``Bucketize`` for
boundaries. Vocabulary files are read here, so the Keras
model carries its vocabulary. A column or option the layers cannot reproduce exactly is
refused with ``InexpressibleColumn`` naming it: nothing approximate is built.

Kinds (docs/migration.md, "Canned estimators", has each column's Keras side): ``numeric``,
``bucketized``, ``vocabulary`` (list and file), ``hash``, ``identity``, ``weighted``,
``crossed`` (leaves: categorical specs or ``raw`` feature keys), ``embedding``,
``shared_embedding`` (an embedding naming the ``table`` it shares), ``indicator``.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

from estimator_dist.errors import UsageError

Spec = dict[str, Any]


class InexpressibleColumn(UsageError):
    """A feature column, or one of its options, that the Keras conversion cannot
    reproduce exactly."""


def _refuse(column: Any, option: str, value: Any) -> InexpressibleColumn:
    shown = value.__qualname__ if callable(value) else repr(value)
    return InexpressibleColumn(
        f"feature column {_name(column)!r} must use only options the Keras conversion "
        f"reproduces exactly; {option} is not one. Received: {option}={shown}")


def _name(column: Any) -> str:
    return str(getattr(column, "name", column))


def _kind_name(column: Any) -> str:
    """The column's class name without V1's leading underscore (``_NumericColumn``)."""
    return type(column).__name__.lstrip("_")


def _dtype(column: Any) -> str:
    import tensorflow as tf  # Late: loads TensorFlow.

    dtype = tf.as_dtype(column.dtype)
    if dtype == tf.string:
        return "string"
    if dtype.is_integer:
        return "int64"
    raise _refuse(column, "dtype", dtype.name)


def _numeric(column: Any) -> Spec:
    if column.normalizer_fn is not None:
        raise _refuse(column, "normalizer_fn", column.normalizer_fn)
    return {"kind": "numeric", "key": column.key, "shape": [int(d) for d in column.shape]}


def _bucketized(column: Any) -> Spec:
    source = _numeric(column.source_column)
    width = math.prod(source["shape"])
    boundaries = [float(b) for b in column.boundaries]
    return {"kind": "bucketized", "source": source, "boundaries": boundaries,
            "num_buckets": width * (len(boundaries) + 1)}


def _vocabulary(column: Any, vocabulary: list[Any]) -> Spec:
    dtype = _dtype(column)
    values = [str(v) for v in vocabulary] if dtype == "string" else [int(v) for v in vocabulary]
    return {"kind": "vocabulary", "key": column.key, "dtype": dtype, "vocabulary": values,
            "num_oov_buckets": int(column.num_oov_buckets),
            "default_value": int(column.default_value),
            "num_buckets": len(values) + int(column.num_oov_buckets)}


def _vocabulary_list(column: Any) -> Spec:
    return _vocabulary(column, list(column.vocabulary_list))


def _vocabulary_file(column: Any) -> Spec:
    """The file's whole lines (its first ``vocabulary_size``), as TensorFlow reads it."""
    import tensorflow as tf  # Late: loads TensorFlow.

    with tf.io.gfile.GFile(column.vocabulary_file, "r") as file:
        lines = file.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if column.vocabulary_size is not None:
        lines = lines[:column.vocabulary_size]
    return _vocabulary(column, lines)


def _hash(column: Any) -> Spec:
    return {"kind": "hash", "key": column.key, "dtype": _dtype(column),
            "num_buckets": int(column.hash_bucket_size)}


def _identity(column: Any) -> Spec:
    default = column.default_value
    return {"kind": "identity", "key": column.key, "num_buckets": int(column.num_buckets),
            "default_value": None if default is None else int(default)}


def _weighted(column: Any) -> Spec:
    import tensorflow as tf  # Late: loads TensorFlow.

    if not tf.as_dtype(column.dtype).is_floating:
        raise _refuse(column, "dtype", tf.as_dtype(column.dtype).name)
    inner = categorical_spec(column.categorical_column)
    return {"kind": "weighted", "categorical": inner, "weight_key": column.weight_feature_key,
            "num_buckets": inner["num_buckets"]}


def _crossed_leaves(column: Any) -> list[Spec]:
    leaves: list[Spec] = []
    for key in column.keys:
        if isinstance(key, str):
            leaves.append({"kind": "raw", "key": key})
        elif _kind_name(key) == "CrossedColumn":
            leaves.extend(_crossed_leaves(key))
        else:
            leaves.append(categorical_spec(key))
    return leaves


class CrossOrderWarning(UserWarning):
    """A crossed column that TensorFlow crosses in two orders, by how its input comes."""


def _warn_of_cross_order(column: Any, leaves: list[Spec]) -> None:
    """Warns when a raw feature key comes before a categorical column among ``leaves``:
    TensorFlow's cross takes its sparse inputs before its dense ones, so on dense input
    (arrays, ``numpy_input_fn``, ``pandas_input_fn``) such a column crosses its raw keys
    last, on parsed ``tf.Example`` input (TFRecords, the export's serving input) in the
    order given; the Keras model crosses as the export does."""
    kinds = [leaf["kind"] == "raw" for leaf in leaves]
    if True in kinds and False in kinds[kinds.index(True):]:
        warnings.warn(
            f"crossed column {_name(column)!r} lists a raw feature before a categorical "
            f"column: TensorFlow crosses dense input (arrays, numpy_input_fn) with the raw "
            f"features last and parsed tf.Example input in the order given; the Keras "
            f"model crosses as the Estimator's export (tf.Example) does, so on dense "
            f"features it may differ from the Estimator's predict (docs/migration.md, "
            f"\"Canned estimators\")", CrossOrderWarning, stacklevel=2)


def _crossed(column: Any) -> Spec:
    leaves = _crossed_leaves(column)
    _warn_of_cross_order(column, leaves)
    return {"kind": "crossed", "keys": leaves,
            "hash_key": column.hash_key, "num_buckets": int(column.hash_bucket_size)}


def _embedding(column: Any) -> Spec:
    if column.combiner not in ("sum", "mean", "sqrtn"):
        raise _refuse(column, "combiner", column.combiner)
    return {"kind": "embedding", "categorical": categorical_spec(column.categorical_column),
            "dimension": int(getattr(column, "dimension", None) or column.variable_shape[-1]),
            "combiner": column.combiner,
            "max_norm": None if column.max_norm is None else float(column.max_norm)}


def _shared_embedding(column: Any) -> Spec:
    """An embedding column whose table (``"table"``: its name) others read too."""
    from estimator_dist.mends import internals  # Late: loads TensorFlow.

    return {**_embedding(column), "kind": "shared_embedding",
            "table": internals.shared_embedding_name(column)}


def _indicator(column: Any) -> Spec:
    return {"kind": "indicator", "categorical": categorical_spec(column.categorical_column)}


_CATEGORICAL: dict[str, Callable[[Any], Spec]] = {
    "BucketizedColumn": _bucketized,
    "VocabularyListCategoricalColumn": _vocabulary_list,
    "VocabularyFileCategoricalColumn": _vocabulary_file,
    "HashedCategoricalColumn": _hash,
    "IdentityCategoricalColumn": _identity,
    "WeightedCategoricalColumn": _weighted,
    "CrossedColumn": _crossed,
}
_DENSE: dict[str, Callable[[Any], Spec]] = {
    "NumericColumn": _numeric,
    "BucketizedColumn": _bucketized,
    "EmbeddingColumn": _embedding,
    "SharedEmbeddingColumn": _shared_embedding,
    "IndicatorColumn": _indicator,
}


def _spec_from(table: dict[str, Callable[[Any], Spec]], column: Any, role: str) -> Spec:
    builder = table.get(_kind_name(column))
    if builder is None:
        raise InexpressibleColumn(
            f"feature column {_name(column)!r} must be one the Keras conversion reproduces "
            f"as {role} ({', '.join(table)}). Received: {type(column).__name__}")
    spec = builder(column)
    spec["name"] = _name(column)
    return spec


def categorical_spec(column: Any) -> Spec:
    """The spec of a categorical column (ids in ``[0, num_buckets)``)."""
    return _spec_from(_CATEGORICAL, column, "a categorical column")


def dense_spec(column: Any) -> Spec:
    """The spec of a column a DNN takes (its ``input_layer``)."""
    return _spec_from(_DENSE, column, "a DNN input")


def linear_spec(column: Any) -> Spec:
    """The spec of a column a linear model takes: categorical (a sparse sum of its weights)
    or numeric (a matmul)."""
    if _kind_name(column) in _CATEGORICAL:
        return categorical_spec(column)
    return _spec_from({"NumericColumn": _numeric}, column, "a linear model input")


def numeric_specs(spec: Spec) -> list[Spec]:
    """The numeric specs a spec reads (itself, a bucketized column's source)."""
    if spec["kind"] == "numeric":
        return [spec]
    if spec["kind"] == "bucketized":
        return [spec["source"]]
    return []


def raw_keys(spec: Spec) -> dict[str, str]:
    """The raw features a spec reads: feature key -> dtype (``float32``, ``int64``,
    ``string``), ``raw`` for a crossed column's raw key (a string, unless another column
    reads it as another dtype)."""
    kind = spec["kind"]
    if kind in ("numeric",):
        return {spec["key"]: "float32"}
    if kind in ("vocabulary", "hash"):
        return {spec["key"]: spec["dtype"]}
    if kind == "identity":
        return {spec["key"]: "int64"}
    if kind == "raw":
        return {spec["key"]: "raw"}
    if kind == "bucketized":
        return raw_keys(spec["source"])
    if kind == "weighted":
        return {**raw_keys(spec["categorical"]), spec["weight_key"]: "float32"}
    if kind == "crossed":
        keys: dict[str, str] = {}
        for leaf in spec["keys"]:
            keys.update(raw_keys(leaf))
        return keys
    return raw_keys(spec["categorical"])
