"""``python -m estimator_dist.train``: train, evaluate and export a model.

With no flags it trains the dense classifier on built-in data, evaluates it, exports a
SavedModel under the model dir and prints the final metrics.
"""
import argparse
import sys

from estimator_dist import config as config_lib
from estimator_dist import logs
from estimator_dist.errors import UsageError


class _OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int. Received: {text!r}")
    return value


def train_parser(subparsers=None):
    """The parser of the train command (standalone, or added to ``subparsers``)."""
    description = "Train, evaluate and export a model under a distribution strategy."
    if subparsers is None:
        parser = _OneLineParser(prog="python -m estimator_dist.train", description=description,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    else:
        parser = subparsers.add_parser("train", description=description)
    defaults = config_lib.RunSettings()
    model = parser.add_argument_group("model")
    model.add_argument("--model", choices=config_lib.MODELS, default=argparse.SUPPRESS,
                       help=f"which built-in model to train (default: {defaults.model})")
    data = parser.add_argument_group("data")
    data.add_argument("--batch-size", type=_positive_int, default=argparse.SUPPRESS,
                      help="global batch size (default: the model's own)")
    dist = parser.add_argument_group("distribution")
    dist.add_argument("--strategy", choices=config_lib.STRATEGIES, default=argparse.SUPPRESS,
                      help=f"distribution strategy (default: {defaults.strategy})")
    dist.add_argument("--num-replicas", type=_positive_int, default=argparse.SUPPRESS,
                      help="replicas for mirrored (default: every GPU, else 2 CPU devices)")
    dist.add_argument("--tpu-name", default=argparse.SUPPRESS,
                      help="TPU name or address for --strategy tpu (default: $TPU_NAME)")
    dist.add_argument("--tpu-validate", action="store_true", default=argparse.SUPPRESS,
                      help="with --strategy tpu: run the TPUEstimator path on CPU")
    dist.add_argument("--collective-timeout", type=_positive_int, default=argparse.SUPPRESS,
                      help="seconds a multi_worker collective waits for a peer (default: 300)")
    run = parser.add_argument_group("run")
    run.add_argument("--max-steps", type=_positive_int, default=argparse.SUPPRESS,
                     help="global steps to train to (default: the model's own)")
    run.add_argument("--model-dir", default=argparse.SUPPRESS,
                     help="checkpoints, events and export (default: a new ./runs/MODEL-TIME)")
    run.add_argument("--save-checkpoints-steps", type=_positive_int, default=argparse.SUPPRESS,
                     help="steps between checkpoints (default: at the end)")
    run.add_argument("--seed", type=int, default=argparse.SUPPRESS,
                     help=f"random seed for data order and initializers (default: {defaults.seed})")
    run.add_argument("--eval-steps", type=_positive_int, default=argparse.SUPPRESS,
                     help="eval batches (default: the whole eval set)")
    run.add_argument("--config", metavar="FILE",
                     help="JSON or YAML file of settings; flags override it")
    run.add_argument("--print-config", action="store_true",
                     help="print the merged settings as JSON and exit")
    run.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                     help="show TensorFlow's logs and full tracebacks")
    return parser


def settings_from_args(args):
    """Merges flag values over the config file over the defaults."""
    values = config_lib.load_file(args.config) if args.config else {}
    source = f"config file {args.config!r}" if args.config else "config"
    settings = config_lib.RunSettings.from_dict(values, source=source)
    flags = {k: v for k, v in vars(args).items() if k not in ("config", "print_config")}
    return settings.replace(**flags)


def train_command(args):
    """Runs the job the parsed ``args`` describe; returns the process exit code."""
    settings = settings_from_args(args)
    if args.print_config:
        import json  # pylint: disable=import-outside-toplevel

        print(json.dumps(settings.to_dict(), indent=2, sort_keys=True))
        return 0
    logs.quiet_tensorflow(settings.verbose)
    from estimator_dist import training  # pylint: disable=import-outside-toplevel

    if not settings.verbose:
        logs.quiet_tensorflow_python()
    result = training.run(settings)
    for name, value in sorted(result.metrics.items()):
        print(f"{name:>12}: {value:.4f}" if isinstance(value, float) else f"{name:>12}: {value}")
    print(f"  model dir: {result.model_dir}")
    if result.export_path:
        print(f"   exported: {result.export_path}")
    print(f"  wall time: {result.seconds:.1f} s ({result.examples_per_second:,.0f} examples/s)")
    return 0


def main(argv=None):
    parser = train_parser()
    args = parser.parse_args(argv)
    verbose = getattr(args, "verbose", False)
    try:
        return train_command(args)
    except UsageError as error:
        if verbose:
            raise
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
