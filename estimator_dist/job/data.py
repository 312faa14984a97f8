"""The run's data: the built-in model's arrays or the user's CSV and TFRecord files, as
input_fns, checked before anything is written (the files exist, hold records, agree on
the width of ``x``, and the eval set holds at least one batch)."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from estimator_dist.errors import UsageError
from input_fns import check_files, from_arrays, from_files
from input_fns.checks import DEFAULT_LIMIT

if TYPE_CHECKING:
    from estimator_dist.job.settings import RunSettings
    from estimator_dist.models import BuiltinModel
    from estimator_dist.plan import Plan
    from input_fns.checks import Sample


@dataclasses.dataclass(frozen=True)
class Data:
    """The run's input_fns, the shape of one example's ``x``, and what run.json records."""

    train_fn: Callable[..., Any]
    eval_fn: Callable[..., Any]
    x_shape: list[int]
    spec: dict[str, Any]


def _check_eval_examples(count: int, batch_size: int, where: object) -> None:
    """Refuses an eval set smaller than one batch: evaluation would see no example (the last
    partial batch is dropped) and report zeros."""
    if count < batch_size:
        raise UsageError(f"eval data must hold at least one batch ({batch_size} examples), or "
                         f"evaluation sees none. Received: {count} examples in {where}")


def _builtin_data(model: BuiltinModel, settings: RunSettings) -> Data:
    train, evaluation = model.train_data(), model.eval_data()
    _check_eval_examples(len(evaluation.labels), settings.batch_size, "the built-in eval data")
    train_fn = from_arrays(train.features, train.labels, batch_size=settings.batch_size,
                           seed=settings.seed)
    eval_fn = from_arrays(evaluation.features, evaluation.labels,
                          batch_size=settings.batch_size, shuffle=False, num_epochs=1)
    return Data(train_fn, eval_fn, list(train.features["x"].shape[1:]),
                 {"train": "built-in", "eval": "built-in"})


def _files_input_fn(name: str, files: Sequence[str], model: BuiltinModel,
                    **options: Any) -> Callable[..., Any]:
    try:
        return from_files(files, x_shape=model.x_shape, **options)
    except (OSError, ValueError) as error:
        raise UsageError(f"{name} must be CSV or TFRecord files in the layout of "
                         f"docs/input.md: {error}") from None


def _checked_sample(name: str, files: Sequence[str], settings: RunSettings) -> Sample:
    """A first pass over the files' first records (``input_fns.check_files``)."""
    try:
        sample = check_files(files, num_classes=settings.params.get("num_classes"),
                             limit=max(DEFAULT_LIMIT, settings.batch_size))
    except (OSError, ValueError) as error:  # UnicodeDecodeError is a ValueError.
        raise UsageError(f"{name} {error}") from None
    if not sample.records:
        raise UsageError(f"{name} must hold records. Received: no records in {files}")
    return sample


def _check_samples(settings: RunSettings, eval_files: Sequence[str]) -> None:
    train = _checked_sample("train_data", cast(list[str], settings.train_data), settings)
    if eval_files is settings.train_data:
        evaluation = train
    else:
        evaluation = _checked_sample("eval_data", eval_files, settings)
        if evaluation.x_size != train.x_size:
            raise UsageError(
                f"eval_data must have the {train.x_size} values of x per record that "
                f"train_data has. Received: {evaluation.x_size} in {eval_files}")
    if evaluation.complete:
        _check_eval_examples(evaluation.records, settings.batch_size, eval_files)


def _file_data(model: BuiltinModel, settings: RunSettings) -> Data:
    # Files are read when train_data is set.
    eval_files = cast(list[str], settings.eval_data or settings.train_data)
    train_fn = _files_input_fn("train_data", cast(list[str], settings.train_data), model,
                               batch_size=settings.batch_size, seed=settings.seed)
    eval_fn = _files_input_fn("eval_data", eval_files, model, batch_size=settings.batch_size,
                              shuffle=False, num_epochs=1)
    _check_samples(settings, eval_files)
    x_shape = train_fn().element_spec[0]["x"].shape[1:].as_list()
    return Data(train_fn, eval_fn, x_shape, {"train": settings.train_data, "eval": eval_files})


def for_run(model: BuiltinModel, settings: RunSettings, strategy: Plan) -> Data:
    """The run's data, checked (files exist and fit the model) before anything is written,
    with input_fns as ``strategy`` (a ``plan.Plan``) calls them."""
    data = _file_data(model, settings) if settings.train_data else _builtin_data(model, settings)
    return dataclasses.replace(data, train_fn=strategy.adapt_input(data.train_fn),
                               eval_fn=strategy.adapt_input(data.eval_fn))
