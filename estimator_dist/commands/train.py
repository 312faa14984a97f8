"""``python -m estimator_dist.train``: train, evaluate and export a model.

With no flags it trains the dense classifier on built-in data, evaluates it, exports a
SavedModel under the model dir and prints the final metrics. Settings come from flags,
then ``--config FILE``, then the run recorded in an existing ``--model-dir``, then
defaults.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping, Sequence

from estimator_dist import config_files, models, precision, ps_stop, run_record
from estimator_dist.commands import cli, logs
from estimator_dist.job import settings as settings_lib, engines, stop_deadline
from estimator_dist.distribute import cluster_sources, strategy_table
from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    from estimator_dist.job.engines import EngineResult
    from estimator_dist.job.training import Result

_PROG = "python -m estimator_dist.train"
_NOT_SETTINGS = ("config", "print_config", "param", "engine")
_PRECISION_CHOICES = "{none,bfloat16,float16}"  # As --strategy's choices are shown.


def _param(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (KEY, VALUE); VALUE is read as JSON when it parses, else a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE. Received: {text!r}")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def _mixed_precision(text: str) -> str | None:
    """``--mixed-precision`` value -> the setting: "none" is None (float32)."""
    if text != "none" and text not in precision.MIXED_PRECISIONS:
        raise argparse.ArgumentTypeError(f"must be one of none, "
                                         f"{', '.join(precision.MIXED_PRECISIONS)}. "
                                         f"Received: {text!r}")
    return None if text == "none" else text


def _each_model(field: str) -> str:
    """``field`` of every built-in model, for a flag's help: "dense 128, lstm 64"."""
    return ", ".join(f"{model.name} {getattr(model, field)}" for model in models.MODELS.values())


def _at_most(name: str) -> str:
    """A numeric flag's bound, for its help: "at most 2,147,483,647"."""
    return f"at most {settings_lib.MAXIMA[name]:,}"


def _add_model_flags(parser: argparse.ArgumentParser, defaults: settings_lib.RunSettings) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("--model", choices=models.NAMES,
                       help=f"which built-in model to train (default: {defaults.model})")
    group.add_argument("--param", type=_param, action="append", metavar="KEY=VALUE",
                       default=None,
                       help="set a model param, e.g. learning_rate=0.001 or "
                            "hidden_units=[32,32]; repeatable (default: the model's own)")


def _add_data_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("data")
    group.add_argument("--train-data", nargs="+", metavar="FILE",
                       help="CSV or TFRecord files or globs to train on: a 'label' column "
                            "or feature and numeric x (see docs/input.md) (default: the "
                            "built-in data)")
    group.add_argument("--eval-data", nargs="+", metavar="FILE",
                       help="CSV or TFRecord files to evaluate on (default: the "
                            "--train-data files)")
    group.add_argument("--batch-size", type=cli.positive_int, metavar="N",
                       help="global batch size, split evenly across replicas, "
                            f"{_at_most('batch_size')} (default: the model's own: "
                            f"{_each_model('batch_size')})")


def _add_distribution_flags(parser: argparse.ArgumentParser,
                            defaults: settings_lib.RunSettings) -> None:
    group = parser.add_argument_group("distribution")
    group.add_argument("--strategy", choices=strategy_table.NAMES,
                       help=f"distribution strategy (default: {defaults.strategy})")
    group.add_argument("--num-replicas", type=cli.positive_int, metavar="N",
                       help=f"replicas for mirrored, {_at_most('num_replicas')} (default: "
                            "every GPU, else 2 CPU devices)")
    group.add_argument("--tpu-name", metavar="NAME",
                       help="TPU name or address for --strategy tpu (default: $TPU_NAME)")
    group.add_argument("--tpu-validate", action="store_true",
                       help="with --strategy tpu: run the TPUEstimator path on CPU")
    group.add_argument("--collective-timeout", type=cli.positive_int, metavar="SECONDS",
                       help="seconds a multi_worker run may stall on a dead or frozen peer "
                            f"before it ends, {_at_most('collective_timeout')} (default: 300)")
    group.add_argument("--rendezvous-timeout", type=cli.positive_int, metavar="SECONDS",
                       help="seconds a multi_worker or parameter_server task waits for its "
                            "peers, then fails naming the tasks not reached, "
                            f"{_at_most('rendezvous_timeout')} (default: 300)")
    group.add_argument("--steps-per-run", type=cli.positive_int, metavar="N",
                       help=f"training steps per Session.run, {_at_most('steps_per_run')} "
                            "(default: 20 under default, mirrored and multi_worker, else 1; "
                            "tpu: iterations per loop)")
    group.add_argument("--mixed-precision", type=_mixed_precision, metavar=_PRECISION_CHOICES,
                       help="compute in bfloat16 (CPUs with bfloat16 units, TPUs) or float16 "
                            "(GPUs, dynamic loss scaling); variables and checkpoints stay "
                            "float32 (default: none, float32; see docs/precision.md)")
    group.add_argument("--sparse-gradients", choices=strategy_table.SPARSE_GRADIENTS,
                       help="with --strategy multi_worker, how sparse gradients (embedding, "
                            "linear and crossed columns) cross between workers: as the rows "
                            "a step touched or dense by each table's bytes (auto), always as "
                            "rows, or always dense (default: auto; see docs/strategies.md)")


def _add_run_flags(parser: argparse.ArgumentParser, defaults: settings_lib.RunSettings) -> None:
    group = parser.add_argument_group("run")
    group.add_argument("--max-steps", type=cli.positive_int, metavar="N",
                       help=f"global step to train to, {_at_most('max_steps')} (default: "
                            f"the model's own: {_each_model('max_steps')}; on resume: the "
                            "recorded run's)")
    group.add_argument("--model-dir", metavar="DIR",
                       help="checkpoints, events, run.json and export; an existing one is "
                            "resumed (default: a new ./runs/MODEL-TIME)")
    group.add_argument("--save-checkpoints-steps", type=cli.positive_int, metavar="N",
                       help="steps between checkpoints, each one evaluated, at least "
                            f"max_steps / {settings_lib.MAX_CHECKPOINTS:,} and "
                            f"{_at_most('save_checkpoints_steps')} (default: a checkpoint "
                            "every 10 minutes, one evaluation at the end)")
    group.add_argument("--seed", type=cli.non_negative_int, metavar="N",
                       help=f"random seed for data order and initializers, "
                            f"{_at_most('seed')} (default: {defaults.seed})")
    group.add_argument("--eval-steps", type=cli.positive_int, metavar="N",
                       help=f"eval batches, {_at_most('eval_steps')} (default: the whole "
                            "eval set)")
    group.add_argument("--config", metavar="FILE", default=None,
                       help="JSON or YAML file of settings (keys as the flags, with _); "
                            "flags override it (default: none)")
    group.add_argument("--print-config", action="store_true", default=False,
                       help="print the merged settings as JSON and exit")
    group.add_argument("--verbose", action="store_true",
                       help="show TensorFlow's logs and full tracebacks (default: quiet)")


def _add_export_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("export")
    group.add_argument("--export-dir", metavar="DIR",
                       help="where the SavedModel goes (default: MODEL_DIR/export)")
    group.add_argument("--no-export", dest="export", action="store_false",
                       help="skip the SavedModel export")


def _add_engine_flag(parser: argparse.ArgumentParser) -> None:
    """Adds ``--engine`` to the train parser."""
    parser.add_argument("--engine", choices=engines.ENGINES, default="estimator",
                        help="train with the Estimator (default), Keras fit, or a custom "
                             "training loop: the TF2 paths run the built-in model on the "
                             "built-in data and print the same metrics (see docs/migration.md)")


def train_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of the train command (standalone, or added to ``subparsers``)."""
    parser = cli.command_parser(
        "train", "Train, evaluate and export a model under a distribution strategy.",
        subparsers)
    # A settings flag that is not given stays out of args, so the config file's value and
    # the recorded run's show through (flags -> config file -> run.json -> defaults).
    parser.argument_default = argparse.SUPPRESS
    defaults = settings_lib.RunSettings()
    _add_model_flags(parser, defaults)
    _add_data_flags(parser)
    _add_distribution_flags(parser, defaults)
    _add_run_flags(parser, defaults)
    _add_export_flags(parser)
    _add_engine_flag(parser)
    return parser


def _flag_values(args: argparse.Namespace) -> dict[str, Any]:
    values = {k: v for k, v in vars(args).items() if k not in _NOT_SETTINGS}
    if args.param:
        values["params"] = dict(args.param)
    return values


def _settings_and_record(args: argparse.Namespace
                         ) -> tuple[settings_lib.RunSettings, dict[str, Any] | None]:
    """The settings (flags over the config file over the recorded run over the defaults)
    and the model dir's record (``run_record.load``; None without one)."""
    file_values = config_files.load_file(args.config) if args.config else {}
    source = f"config file {args.config!r}" if args.config else "config"
    settings_lib.check_keys(file_values, source)
    flags = _flag_values(args)
    model_dir = flags.get("model_dir", file_values.get("model_dir"))
    record = run_record.load(model_dir) if isinstance(model_dir, str) and model_dir else None
    carried = run_record.carried_settings(record, settings_lib.RunSettings)
    merged = settings_lib.merge(carried, file_values, flags)
    return settings_lib.RunSettings.from_dict(merged, source=source), record


def settings_from_args(args: argparse.Namespace) -> settings_lib.RunSettings:
    """Merges flags over the config file over the recorded run over the defaults."""
    return _settings_and_record(args)[0]


def _print_metrics(metrics: Mapping[str, Any], step: int | None) -> None:
    """The summary's eval metrics line (none without metrics)."""
    shown = "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                      for k, v in sorted(metrics.items()))
    if shown:
        print(f"metrics    {shown}" + (f"  (step {step})" if step is not None else ""))


def _print_training(steps: int, seconds: float, examples_per_second: float,
                    steps_per_second: float) -> None:
    """The summary's training speed line."""
    print(f"training   {steps} steps in {seconds:.1f} s: {examples_per_second:,.0f} "
          f"examples/s, {steps_per_second:.1f} steps/s")


def _print_summary(result: Result) -> None:
    """The summary of an Estimator run (``training.Result``)."""
    _print_metrics({k: v for k, v in result.metrics.items() if k != "global_step"},
                   result.metrics.get("global_step"))
    done = result.throughput
    if done and done.steps:
        _print_training(done.steps, done.seconds, done.examples_per_second,
                        done.steps / done.seconds)
    elif result.task_type != "evaluator":
        print(f"training   none: the model dir is already at max_steps {result.max_steps} "
              "(raise --max-steps to train further)")
    if result.export_path:
        print(f"export     {result.export_path}")
    print(f"model dir  {result.model_dir}")
    print(f"wall time  {result.seconds:.1f} s")


def _print_engine_summary(result: EngineResult, settings: settings_lib.RunSettings) -> None:
    """The summary of a TF2 engine's run (``engines.EngineResult``), in the lines of the
    Estimator's: its speed leaves out the first step, which traces the function."""
    print(f"engine     {result.engine}: {settings.model} under {settings.strategy}, "
          f"{result.replicas} replica(s), global batch {result.batch_size}")
    _print_metrics({k: float(v) for k, v in result.metrics.items()}, result.steps)
    _print_training(result.steps, result.seconds, result.examples_per_second,
                    (result.steps - 1) / result.seconds)


def _saved_words(settings: settings_lib.RunSettings) -> Callable[[], str]:
    """For the stop deadline's line (``stop_deadline.Deadline.saved``): a task of a cluster
    other than the chief writes no checkpoints; any other names the model dir's newest."""
    if settings.kind.cluster:
        try:
            task = cluster_sources.task_from_env(strategy=settings.strategy)
        except UsageError:
            task = None  # The run itself reports the missing or bad cluster.
        if task is not None and not task.is_chief:
            return lambda: stop_deadline.WRITES_NO_CHECKPOINTS
    return stop_deadline.newest_checkpoint(settings.model_dir)


def _ps_announces(settings: settings_lib.RunSettings) -> Callable[[int], None] | None:
    """For the stop deadline's ``on_signal``: a parameter server tells its chief and
    workers that it stops (``ps_stop``), so that the chief saves their step while it
    serves; None for any other task."""
    if not settings.kind.cluster:
        return None
    try:
        task = cluster_sources.task_from_env(strategy=settings.strategy)
    except UsageError:
        return None  # The run itself reports the missing or bad cluster.
    if task is None or task.task_type != "ps":
        return None
    name, model_dir = f"ps {task.task_index}", settings.model_dir
    return lambda signum: ps_stop.announce(
        model_dir, f"{name} got {signal.Signals(signum).name}")


def train_command(args: argparse.Namespace, deadline: stop_deadline.Deadline | None = None) -> int:
    """Runs the job the parsed ``args`` describe; returns the process exit code.

    ``deadline``: the ``stop_deadline.Deadline`` of the process, told what the run saves.
    """
    settings, record = _settings_and_record(args)
    if args.print_config:
        print(json.dumps(settings.to_dict(), indent=2, sort_keys=True))
        return 0
    logs.quiet_tensorflow(settings.verbose)
    # Late: loads TensorFlow.
    from estimator_dist.hooks import preemption
    from estimator_dist.job import preparation, training

    logs.tensorflow_python_logging(settings.verbose)
    if args.engine != "estimator":
        _print_engine_summary(engines.run(settings, args.engine), settings)
        return 0
    # The model dir is fixed before the run, so that the stop deadline's line can name it.
    settings = settings.replace(
        model_dir=settings.model_dir or preparation.default_model_dir(settings.model))
    if deadline is not None:
        deadline.saved = _saved_words(settings)
        deadline.on_signal = _ps_announces(settings)
    try:
        _print_summary(training.run(settings, record=record, hold_model_dir=True,
                                    on_stopped=deadline.settle if deadline else None))
    except preemption.Preempted as stop:
        print(f"{_PROG}: {stop} (run again with the same --model-dir to resume)",
              file=sys.stderr)
        return 128 + stop.signum
    return 0


def _stop_deadline() -> ContextManager[stop_deadline.Deadline]:
    """The context bounding how long this task takes to end on SIGTERM or SIGINT
    (``stop_deadline``): a parameter server, blocked in TensorFlow's C++ server where no
    Python handler runs, serves until the chief and workers have ended."""
    try:
        tf_config = cluster_sources.task_from_env() if "TF_CONFIG" in os.environ else None
    except UsageError:
        tf_config = None  # The run itself reports the bad TF_CONFIG.
    if tf_config is not None and tf_config.task_type == "ps":
        return stop_deadline.bounded(
            _PROG, linger_while=stop_deadline.training_tasks_answer(tf_config))
    return stop_deadline.bounded(_PROG)


def main(argv: Sequence[str] | None = None) -> int:
    # SIGTERM outside the training steps (which preemption.PreemptionHook handles) ends
    # the run with one line.
    with cli.sigterm_raises(), _stop_deadline() as deadline:
        command = functools.partial(train_command, deadline=deadline)
        return cli.run(train_parser(), command, argv, interrupted_note=(
            "the checkpoints saved so far are kept (run again with the same --model-dir "
            "to resume)"))
