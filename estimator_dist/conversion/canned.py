"""A trained canned Estimator as a Keras model with the same predictions.

``to_keras(estimator)`` reads what the Estimator object was built with (its head, feature
columns, hidden units, activation, batch norm, sparse combiner) and the variables of the
latest checkpoint in its model dir, and builds a Keras model:

* inputs: one per raw feature the columns read (``weight_column`` is not one), a dict
  keyed by feature name: a numeric column's feature of its shape ([batch] too for shape
  (1,)), any other [batch, k] (k values per example; strings as strings).
* outputs: a dict as the Estimator's ``predict`` gives it: ``logits``, ``probabilities``,
  ``class_ids``, ``classes``, ``all_class_ids``, ``all_classes`` (and ``logistic`` for two
  classes) of a classifier,
  ``predictions`` of a regressor.
* layers named after the checkpoint's scopes: ``dnn_<column>`` (``DenseColumn``),
  ``hiddenlayer_<i>``, ``batchnorm_<i>``, ``logits``; ``linear_<column>``
  (``LinearColumn``), ``linear_bias``; ``head``.

Supported: ``DNNClassifier``/``Regressor``, ``LinearClassifier``/``Regressor`` and
``DNNLinearCombinedClassifier``/``Regressor``, V1 and V2, without a partitioner. Dropout is
left out (it does nothing at inference). Built with ``keras`` (Keras 2 on TensorFlow
2.15, Keras 3 on 2.16+). On TensorFlow 2.15, convert after the Estimator's own calls in the
process (``keras_conversion.to_keras``).
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable

from estimator_dist.conversion import feature_columns
from estimator_dist.conversion.eager import eagerly
from estimator_dist.conversion.feature_columns import InexpressibleColumn, Spec
from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

# A converted model → the parsing spec of its Estimator's feature columns (``_parsing_spec``),
# for ``example_signatures``.
_PARSING_SPECS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# A converted model → its weights' checkpoint variables (by the weight's id), for
# ``optimizer``.
_SOURCES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# The Estimator's optimizers whose Keras counterpart continues them: name in the
# checkpoint's ``training/`` scope → (Keras class name, hyperparameters read from the
# checkpoint, slots per variable in the Keras optimizer's order). SGD keeps its momentum
# slot only when its momentum is not 0 (``_slots``).
_OPTIMIZERS = {
    "Adagrad": ("Adagrad", ("learning_rate",), ("accumulator",)),
    "Adam": ("Adam", ("learning_rate", "beta_1", "beta_2"), ("m", "v")),
    "Ftrl": ("Ftrl", ("learning_rate", "learning_rate_power", "l1_regularization_strength",
                      "l2_regularization_strength", "beta"), ("accumulator", "linear")),
    "SGD": ("SGD", ("learning_rate", "momentum"), ("momentum",)),
}
_BATCH_NORM_EPSILON = 1e-3  # The canned DNN's BatchNormalization keeps Keras's default.
_CANNED = ("DNNClassifier", "DNNRegressor", "LinearClassifier", "LinearRegressor",
           "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor")


def _activations() -> dict[Callable[..., Any], str]:
    """The activation functions the canned DNN takes → Keras's names for the same op."""
    import tensorflow as tf  # Late: loads TensorFlow.

    return {tf.nn.relu: "relu", tf.nn.tanh: "tanh", tf.nn.sigmoid: "sigmoid",
            tf.sigmoid: "sigmoid", tf.nn.elu: "elu", tf.nn.selu: "selu",
            tf.nn.softplus: "softplus", tf.nn.softsign: "softsign"}


def canned_name(estimator: Any) -> str:
    """The canned class ``estimator`` is (``DNNClassifier`` for ``DNNClassifierV2``).

    Raises:
      UsageError: ``estimator`` is no canned Estimator the conversion knows.
    """
    for cls in type(estimator).__mro__:
        name = cls.__name__.removesuffix("V2")
        if name in _CANNED and cls.__module__.startswith("tensorflow_estimator."):
            return name
    raise UsageError(f"estimator must be a model dir or one of the canned Estimators "
                     f"{', '.join(_CANNED)} (V1 or V2). Received: {type(estimator).__name__}")


class _Checkpoint:
    """The latest checkpoint's variables, each read on request."""

    def __init__(self, path: str) -> None:
        import tensorflow as tf  # Late: loads TensorFlow.

        self.path = path
        self._reader = tf.train.load_checkpoint(path)

    def __getitem__(self, name: str) -> np.ndarray:
        if not self._reader.has_tensor(name):
            raise UsageError(f"checkpoint must hold the canned Estimator's variable {name!r}. "
                             f"Received: checkpoint={self.path!r} without it")
        return self._reader.get_tensor(name)

    def names(self) -> list[str]:
        return list(self._reader.get_variable_to_shape_map())


class _Builder:
    """Builds the Keras model part by part, collecting each layer's checkpoint values."""

    def __init__(self, checkpoint: _Checkpoint, portable: bool) -> None:
        import keras  # Late: loads Keras.

        from estimator_dist.conversion import _column_layers  # Late: loads TensorFlow.

        self.keras, self.layers = keras, _column_layers
        self.portable = None
        if portable:
            from estimator_dist.conversion import _portable_columns  # Late: loads Keras 3.

            self.portable = _portable_columns
        self.checkpoint = checkpoint
        self.weights: dict[str, list[str]] = {}
        self.inputs: dict[str, Any] = {}

    def add_inputs(self, specs: list[Spec]) -> None:
        """One input per raw feature: a numeric column's of its shape, others [batch, k],
        dense or sparse (Keras 3 would fill a sparse value given to a dense input with 0,
        a value of its own, where the columns must see none)."""
        dtypes: dict[str, str] = {}
        shapes: dict[str, tuple[int | None, ...]] = {}
        for spec in specs:
            for key, dtype in feature_columns.raw_keys(spec).items():
                if dtypes.get(key, "raw") == "raw":
                    dtypes[key] = dtype
            for numeric in feature_columns.numeric_specs(spec):
                shapes[numeric["key"]] = tuple(numeric["shape"])
        dtypes = {key: "string" if dtype == "raw" else dtype for key, dtype in dtypes.items()}
        if self.portable:
            crossed = {k for spec in specs for k in self.portable.crossed_keys(spec)}
            self.inputs = self.portable.inputs(dtypes, shapes, crossed)
            return
        for key, dtype in sorted(dtypes.items()):
            self.inputs[key] = self.keras.Input(shape=shapes.get(key, (None,)), dtype=dtype,
                                                sparse=key not in shapes, name=key)

    def features(self, spec: Spec) -> dict[str, Any]:
        return {key: self.inputs[key] for key in sorted(feature_columns.raw_keys(spec))}

    def layer(self, layer: Any, names: list[str], *args: Any) -> Any:
        """Calls ``layer``; its weights will be the checkpoint's variables ``names``."""
        return self.own(layer, names)(*args)

    def own(self, layer: Any, names: list[str]) -> Any:
        """``layer``, whose weights will be the checkpoint's variables ``names``."""
        self.weights[layer.name] = names
        return layer

    def table(self, name: str, variable: str, dimension: int) -> Any:
        """A portable model's ``Embedding`` holding the checkpoint's table ``variable``."""
        rows = int(self.checkpoint[variable].shape[0])
        return self.own(self.keras.layers.Embedding(rows, dimension, name=name,
                                                    embeddings_initializer="zeros"),
                        [variable])

    def shared_tables(self, specs: list[Spec]) -> dict[str, Any]:
        """Each shared embedding column's output (by name), one layer a shared table."""
        outputs: dict[str, Any] = {}
        for table in sorted({s["table"] for s in specs if s["kind"] == "shared_embedding"}):
            group = [s for s in specs if s.get("table") == table]
            features = {k: v for s in group for k, v in self.features(s).items()}
            if self.portable:
                layer = self.table(f"dnn_{table}", self._shared_table(table),
                                   group[0]["dimension"])
                outputs.update((s["name"], self.portable.dense(s, features, layer))
                               for s in group)
                continue
            layer = self.layers.SharedEmbeddingColumns(group, name=f"dnn_{table}")
            outputs.update(zip((s["name"] for s in group),
                               self.layer(layer, [self._shared_table(table)], features)))
        return outputs

    def _shared_table(self, table: str) -> str:
        """The checkpoint's variable of shared table ``table``: where a V1 Estimator keeps
        V1 columns' table, V2 columns' table, and where a V2 Estimator keeps that."""
        scope = "dnn/input_from_feature_columns"
        candidates = [f"{scope}/input_layer/{table}/embedding_weights", f"{scope}/{table}",
                      table]
        names = set(self.checkpoint.names())
        return next((c for c in candidates if c in names), candidates[0])

    def dnn_logits(self, specs: list[Spec], arguments: dict[str, Any], units: int) -> Any:
        scope = "dnn/input_from_feature_columns/input_layer"
        shared = self.shared_tables(specs)
        parts = []
        for spec in specs:
            if spec["name"] in shared:
                parts.append(shared[spec["name"]])
                continue
            names = ([f"{scope}/{spec['name']}/embedding_weights"]
                     if spec["kind"] == "embedding" else [])
            if self.portable:
                table = names and self.table(f"dnn_{spec['name']}", names[0],
                                             spec["dimension"])
                parts.append(self.portable.dense(spec, self.features(spec), table or None))
                continue
            layer = self.layers.DenseColumn(spec, name=f"dnn_{spec['name']}")
            parts.append(self.layer(layer, names, self.features(spec)))
        net = parts[0] if len(parts) == 1 else self.keras.layers.Concatenate(
            name="dnn_input_layer")(parts)
        activation = arguments["activation"]
        for i, width in enumerate(arguments["hidden_units"]):
            name = f"dnn/hiddenlayer_{i}"
            net = self.layer(self.keras.layers.Dense(width, activation=activation,
                                                     name=f"hiddenlayer_{i}"),
                             [f"{name}/kernel", f"{name}/bias"], net)
            if arguments["batch_norm"]:
                norm = f"{name}/batchnorm_{i}"
                net = self.layer(
                    self.keras.layers.BatchNormalization(epsilon=_BATCH_NORM_EPSILON,
                                                         name=f"batchnorm_{i}"),
                    [f"{norm}/{v}" for v in ("gamma", "beta", "moving_mean", "moving_variance")],
                    net)
        return self.layer(self.keras.layers.Dense(units, name="logits"),
                          ["dnn/logits/kernel", "dnn/logits/bias"], net)

    def linear_logits(self, specs: list[Spec], combiner: str, units: int) -> Any:
        scope = "linear/linear_model"
        if self.portable:
            return self._portable_linear_logits(self.portable, specs, combiner, units, scope)
        parts = [self.layer(self.layers.LinearColumn(spec, units, combiner,
                                                     name=f"linear_{spec['name']}"),
                            [f"{scope}/{spec['name']}/weights"], self.features(spec))
                 for spec in specs]
        return self.layer(self.layers.LinearBias(units, name="linear_bias"),
                          [f"{scope}/bias_weights"], parts)

    def _portable_linear_logits(self, portable: Any, specs: list[Spec], combiner: str,
                                units: int, scope: str) -> Any:
        parts = []
        for spec in specs:
            name, variable = f"linear_{spec['name']}", f"{scope}/{spec['name']}/weights"
            if spec["kind"] == "numeric":
                weights = self.own(self.keras.layers.Dense(units, use_bias=False, name=name),
                                   [variable])
            else:
                weights = self.table(name, variable, units)
            parts.append(portable.linear_part(spec, self.features(spec), weights, combiner))
        bias = self.own(self.keras.layers.Dense(units, use_bias=False, name="linear_bias"),
                        [f"{scope}/bias_weights"])
        return portable.linear_logits(parts, bias)

    def classifier_head(self, logits: Any, n_classes: int,
                        label_vocabulary: list[str] | None) -> dict[str, Any]:
        if self.portable:
            return self.portable.classifier_head(logits, n_classes, label_vocabulary)
        return self.layers.ClassifierHead(n_classes, label_vocabulary, name="head")(logits)


def _activation(arguments: dict[str, Any]) -> str:
    function = arguments["activation_fn"]
    name = _activations().get(function)
    if name is None:
        raise InexpressibleColumn(
            f"activation_fn must be one the Keras conversion names "
            f"(tf.nn.{', tf.nn.'.join(sorted(set(_activations().values())))}). "
            f"Received: activation_fn={function!r}")
    return name


def _normalized(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The model_fn's arguments under the DNN/Linear names, partitioners refused."""
    for option in ("partitioner", "input_layer_partitioner"):
        if arguments.get(option) is not None:
            raise UsageError(f"{option} must be None for the Keras conversion (its variables "
                             f"are split in parts). Received: {option}={arguments[option]!r}")
    if name.startswith("DNNLinearCombined"):
        return {"head": arguments["head"], "label_vocabulary": arguments["label_vocabulary"],
                "feature_columns": arguments["dnn_feature_columns"] or [],
                "hidden_units": arguments["dnn_hidden_units"],
                "activation_fn": arguments["dnn_activation_fn"],
                "batch_norm": arguments["batch_norm"],
                "linear_feature_columns": arguments["linear_feature_columns"] or [],
                "sparse_combiner": arguments["linear_sparse_combiner"]}
    if name.startswith("DNN"):
        return {**arguments, "linear_feature_columns": []}
    return {"head": arguments["head"], "label_vocabulary": arguments["label_vocabulary"],
            "feature_columns": [], "linear_feature_columns": arguments["feature_columns"],
            "sparse_combiner": arguments["sparse_combiner"]}


def _specs(spec_of: Callable[[Any], Spec], columns: Any) -> list[Spec]:
    """The specs of ``columns`` in the order the Estimator combines them: by name."""
    return [spec_of(c) for c in sorted(columns or [], key=lambda c: c.name)]


def _sum(builder: _Builder, logits: list[Any]) -> Any:
    if len(logits) == 1:
        return logits[0]
    return builder.keras.layers.Add(name="logits_sum")(logits)


def _checked(estimator: Any) -> tuple[dict[str, Any], list[Spec], list[Spec]]:
    """(the model_fn's arguments, the DNN's specs, the linear model's specs), every column
    and option checked."""
    from estimator_dist.mends import internals  # Late: loads TensorFlow.

    name = canned_name(estimator)
    arguments = _normalized(name, internals.canned_estimator_arguments(estimator))
    arguments["regressor"] = name.endswith("Regressor")
    dnn = _specs(feature_columns.dense_spec, arguments["feature_columns"])
    if dnn:
        arguments["activation"] = _activation(arguments)
    return arguments, dnn, _specs(feature_columns.linear_spec,
                                  arguments["linear_feature_columns"])


def _check_portable(specs: list[Spec]) -> None:
    """Raises where a portable model cannot be built: Keras 2, a Keras 3 without
    ``keras.ops.unique``, or a column Keras's own layers cannot compute exactly."""
    import keras  # Late: loads Keras.

    if keras.__version__.startswith("2.") or not hasattr(keras.ops, "unique"):
        raise UsageError(f"portable needs Keras 3.15 or later (keras.ops.unique; on "
                         f"TensorFlow 2.16+, pip install -U 'keras>=3.15'). Received: Keras "
                         f"{keras.__version__}")
    from estimator_dist.conversion import _portable_columns  # Late: loads Keras 3.

    for spec in specs:
        _portable_columns.check(spec)


def check(estimator: Any, portable: bool = False) -> None:
    """Raises what ``to_keras`` would before it reads a checkpoint: ``estimator`` is no
    canned Estimator, or uses a column or option the conversion cannot reproduce."""
    _, dnn, linear = _checked(estimator)
    if portable:
        _check_portable(dnn + linear)


def to_keras(estimator: Any, checkpoint: str, portable: bool = False) -> Any:
    """The Keras model of a trained canned ``estimator`` (see the module docstring).

    Args:
      estimator: the canned Estimator object, as the program builds it.
      checkpoint: the prefix of the checkpoint it trained (``keras_conversion.to_keras``
        takes its model dir's latest).
      portable: build from Keras 3's own layers and ops only (``_portable_columns``), so
        ``keras.models.load_model`` needs no ``estimator_dist``; its inputs are dense.

    Raises:
      InexpressibleColumn: a feature column, option or activation the conversion cannot
        reproduce exactly (a ``UsageError``); with ``portable``, also one that Keras's own
        layers cannot.
      UsageError: ``estimator`` is no canned Estimator, or the checkpoint lacks one of its
        variables, or ``portable`` on Keras 2.
    """
    arguments, dnn, linear = _checked(estimator)
    if portable:
        _check_portable(dnn + linear)
    builder = _Builder(_Checkpoint(checkpoint), portable)
    units = arguments["head"].logits_dimension
    builder.add_inputs(dnn + linear)
    logits = []
    if dnn:
        logits.append(builder.dnn_logits(dnn, arguments, units))
    if linear:
        logits.append(builder.linear_logits(linear, arguments["sparse_combiner"], units))
    total = _sum(builder, logits)
    if arguments["regressor"]:
        outputs = {"predictions": total}
    else:
        vocabulary = arguments["label_vocabulary"]
        outputs = builder.classifier_head(total, max(units, 2), None if vocabulary is None
                                          else [str(v) for v in vocabulary])
    model = builder.keras.Model(builder.inputs, outputs,
                                name=canned_name(estimator).lower())
    for layer_name, names in builder.weights.items():
        layer = model.get_layer(layer_name)
        layer.set_weights([builder.checkpoint[n].reshape(w.shape)
                           for n, w in zip(names, layer.weights)])
    _SOURCES[model] = {id(weight): name for layer_name, names in builder.weights.items()
                       for weight, name in zip(model.get_layer(layer_name).weights, names)}
    _PARSING_SPECS[model] = _parsing_spec(
        list(arguments["feature_columns"]) + list(arguments["linear_feature_columns"]))
    return model


def _parsing_spec(columns: list[Any]) -> dict[str, Any]:
    """The columns' ``tf.Example`` parsing spec: TensorFlow's V2 function refuses V1
    columns (``tf.compat.v1.feature_column``'s shared embeddings), its V1 one V2 shared
    embeddings."""
    import tensorflow as tf  # Late: loads TensorFlow.

    try:
        return dict(tf.feature_column.make_parse_example_spec(columns))
    except ValueError:  # A V1 column.
        return dict(tf.compat.v1.feature_column.make_parse_example_spec(columns))


def _parsed(model: Any, spec: dict[str, Any], examples: Any) -> dict[str, Any]:
    """The model's raw features from serialized ``tf.Example`` strings, variable-length
    ones sparse, as the Estimator's export parses them; padded with '' or -1 (and to one
    value at least) where the model's input is dense (a portable model's)."""
    import tensorflow as tf  # Late: loads TensorFlow.

    features = tf.io.parse_example(examples, spec)
    parsed = {}
    for key, value in ((key, features[key]) for key in model.input):
        if isinstance(value, tf.SparseTensor) and not getattr(model.input[key], "sparse", True):
            shape = tf.stack([value.dense_shape[0], tf.maximum(value.dense_shape[1], 1)])
            value = tf.ensure_shape(
                tf.sparse.to_dense(tf.SparseTensor(value.indices, value.values, shape),
                                   default_value="" if value.dtype == tf.string else -1),
                model.input[key].shape)
        parsed[key] = value
    return parsed


def example_signatures(model: Any) -> dict[str, Any]:
    """The signatures of the Estimator's export with the parsing serving input of its
    feature columns, for a model ``to_keras`` converted (else none): ``predict``
    (``examples`` → every prediction), a classifier's ``classification`` (``inputs`` →
    ``classes``: all classes, ``scores``: probabilities; also ``serving_default``) and,
    for two classes, ``regression`` (``outputs``: logistic); a regressor's ``regression``
    (``outputs``, one label dimension; ``serving_default`` is it, else ``predict``)."""
    import tensorflow as tf  # Late: loads TensorFlow.

    spec = _PARSING_SPECS.get(model)
    if spec is None:
        return {}

    def predictions(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        return model(_parsed(model, spec, examples), training=False)

    def signature(name: str, outputs: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
        return tf.function(lambda serialized: outputs(predictions(serialized)),
                           input_signature=[tf.TensorSpec([None], tf.string, name=name)])

    signatures = {"predict": signature("examples", dict)}
    outputs = model.output
    if "probabilities" in outputs:
        signatures["classification"] = signature(
            "inputs", lambda p: {"classes": p["all_classes"], "scores": p["probabilities"]})
        if "logistic" in outputs:
            signatures["regression"] = signature("inputs",
                                                 lambda p: {"outputs": p["logistic"]})
        signatures["serving_default"] = signatures["classification"]
    elif outputs["predictions"].shape[-1] == 1:
        signatures["regression"] = signature("inputs",
                                             lambda p: {"outputs": p["predictions"]})
        signatures["serving_default"] = signatures["regression"]
    else:
        signatures["serving_default"] = signatures["predict"]
    return signatures


def _optimizer_scope(names: list[str]) -> str:
    scopes = sorted({n.split("/")[1] for n in names if n.startswith("training/")})
    if len(scopes) != 1 or scopes[0] not in _OPTIMIZERS:
        raise UsageError(
            f"checkpoint must hold the slots of one optimizer the Keras conversion carries "
            f"({', '.join(_OPTIMIZERS)}; a V2 canned Estimator's). Received: "
            f"{', '.join(scopes) or 'none'}")
    return scopes[0]


def _hyperparameters(reader: _Checkpoint, scope: str, names: tuple[str, ...]) -> dict[str, float]:
    """``names``' values in the checkpoint; a learning-rate decay, which Keras's optimizers
    no longer have, is refused."""
    decay_name = f"training/{scope}/decay"
    decay = float(reader[decay_name]) if decay_name in reader.names() else 0.0
    if decay:
        raise UsageError(f"optimizer {scope} must train without a learning-rate decay for a "
                         f"Keras optimizer to continue it (Keras's have none). Received: "
                         f"decay={decay:.7g}")
    return {name: float(reader[f"training/{scope}/{name}"]) for name in names}


def _row_updated(model: Any) -> list[str]:
    """The weights the Estimator updated by rows (embedding tables, a linear part's
    categorical weights: their gradients are ``IndexedSlices``)."""
    from estimator_dist.conversion import _column_layers  # Late: loads TensorFlow.

    import keras  # Late: loads Keras.

    return [layer.name for layer in model.layers
            if isinstance(layer, keras.layers.Embedding)
            or isinstance(layer, _column_layers.DenseColumn) and layer.table is not None
            or isinstance(layer, _column_layers.SharedEmbeddingColumns)
            or isinstance(layer, _column_layers.LinearColumn)
            and layer.spec["kind"] != "numeric"]


def _slots(model: Any, scope: str, hyperparameters: dict[str, float]) -> tuple[str, ...]:
    """The slots to carry; SGD's momentum only where every weight was updated whole:
    TensorFlow's sparse momentum decays just the rows a batch touches, Keras's every row."""
    if scope != "SGD":
        return _OPTIMIZERS[scope][2]
    if not hyperparameters["momentum"]:
        return ()
    rows = _row_updated(model)
    if rows:
        raise UsageError(f"optimizer SGD with momentum must have updated every weight whole "
                         f"for a Keras optimizer to continue it (TensorFlow decays the "
                         f"momentum of only the rows a batch touches, Keras of every row). "
                         f"Received: momentum={hyperparameters['momentum']:.7g} over the rows of "
                         f"{', '.join(rows)}")
    return _OPTIMIZERS[scope][2]


@eagerly
def optimizer(model: Any, checkpoint: str) -> Any:
    """A Keras optimizer that continues the Estimator's from ``checkpoint``: the same kind
    (``_OPTIMIZERS``) and hyperparameters, its slots (accumulators, FTRL's linear terms,
    Adam's moments, SGD's momentum) carried to ``model``'s trainable weights and its step
    count at the global step (Adam's bias correction counts it); compile ``model`` with it
    and ``fit`` goes on where the Estimator stopped. Settings that the checkpoint does not
    hold (Adam's ``epsilon``, SGD's ``nesterov``) are Keras's defaults, the Estimator's too.

    Raises:
      UsageError: ``model`` is no model ``to_keras`` converted from a canned Estimator, or
        the checkpoint holds no slots of one optimizer of ``_OPTIMIZERS`` (a wide-and-deep
        model trains two), or its optimizer decays the learning rate, or it is SGD with
        momentum over weights updated by rows (``_slots``).
    """
    import keras  # Late: loads Keras.

    sources = _SOURCES.get(model)
    if sources is None:
        raise UsageError("model must be a Keras model to_keras converted from a canned "
                         f"Estimator. Received: {type(model).__name__} {model.name!r}")
    reader = _Checkpoint(checkpoint)
    scope = _optimizer_scope(list(reader.names()))
    class_name, names, _ = _OPTIMIZERS[scope]
    hyperparameters = _hyperparameters(reader, scope, names)
    slots = _slots(model, scope, hyperparameters)
    keras_optimizer = getattr(keras.optimizers, class_name)(**hyperparameters)
    variables = list(model.trainable_variables)
    keras_optimizer.build(variables)
    keras_optimizer.iterations.assign(int(reader["global_step"]))
    slot_variables = [v for v in keras_optimizer.variables if len(v.shape)]
    for i, variable in enumerate(variables):
        for j, slot in enumerate(slots):
            slot_variables[i * len(slots) + j].assign(
                reader[f"training/{scope}/{sources[id(variable)]}/{slot}"].reshape(
                    variable.shape))
    return keras_optimizer
