"""``python -m estimator_dist.migrate``: a train run's checkpoint as a Keras model, saved.

    python -m estimator_dist.migrate --model-dir D --output OUT
    python -m estimator_dist.migrate --estimator MODULE:FUNCTION --model-dir D --output OUT

Converts the latest checkpoint in ``D`` with ``estimator_dist.conversion.keras_conversion.to_keras``
(its docstring names the inputs and outputs) and saves the model to ``OUT`` (a directory,
or one file when ``OUT`` ends in ``.keras``). ``tf.keras.models.load_model(OUT)`` gives the
same ``logits`` as the Estimator, and ``tf.saved_model.load(OUT)`` of a directory serves
them: on TensorFlow 2.16+ the directory holds Keras 3's format and a SavedModel beside it.
``--keras tf-keras`` writes a Keras 2 model instead (the tf-keras package on 2.16+, read by
``tf_keras.models.load_model``); see ``keras_conversion.OUTPUT_LAYOUT``.

``D`` is only read, and ``OUT`` appears whole or not at all (``keras_conversion.save``).
A damaged newest checkpoint, or a state file that is damaged or points outside ``D``, is
passed over as ``train`` passes over it (``checkpoints.inspect``): the newest intact
checkpoint is converted, with one warning line, and nothing in ``D`` moves.
Symlinks resolved, ``OUT`` must neither be, hold nor lie inside ``D``, and an existing
``OUT`` is replaced (``--overwrite``) only when migrate wrote it.

A canned Estimator's model dir converts with ``--estimator MODULE:FUNCTION``: FUNCTION
(called without arguments) returns the Estimator as the program builds it, whose feature
columns and head the Keras model reproduces (``conversion.canned``); a column it cannot
reproduce exactly is one line on stderr, exit 2, and nothing is written. ``--portable``
builds it from Keras 3's own layers and ops only, so ``keras.models.load_model(OUT)`` needs
no ``estimator_dist``; it takes dense features and refuses what those layers cannot compute.

A checkpoint of another model_fn converts through a mapping file instead of ``D``
(``--checkpoint``, ``--mapping``, ``--keras-model``): see ``checkpoint_mapping``.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Sequence

from estimator_dist.commands import cli, logs
from estimator_dist.conversion import canned, checkpoint_mapping
from estimator_dist.conversion.eager import eagerly
from estimator_dist.conversion.keras_conversion import (KERAS_CHOICES, check_output,
                                                        latest_checkpoint, save, to_keras)
from estimator_dist.errors import UsageError, check_existing_dir

if TYPE_CHECKING:
    import argparse


def migrate_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of the migrate command (standalone, or added to ``subparsers``)."""
    parser = cli.command_parser(
        "migrate", "Convert the latest checkpoint of a train run to a Keras model with the "
        "same logits, and save it.", subparsers)
    parser.add_argument("--model-dir",
                        help="the model dir of a train run (checkpoint and run.json); "
                             "only read")
    parser.add_argument("--estimator", metavar="MODULE:FUNCTION",
                        help="a function returning the canned Estimator (DNNClassifier, "
                             "LinearRegressor, DNNLinearCombinedClassifier, ...) that "
                             "trained --model-dir: its checkpoint converts with the "
                             "Estimator's feature columns and head")
    parser.add_argument("--output", required=True, metavar="OUT",
                        help="where the Keras model goes: a directory (a SavedModel, and "
                             "on TensorFlow 2.16+ Keras 3's format beside it), or a file "
                             "ending in .keras")
    parser.add_argument("--keras", choices=KERAS_CHOICES, default="keras",
                        help="the Keras of the model: tf.keras (default; Keras 3 on "
                             "TensorFlow 2.16+), or tf-keras (Keras 2, for "
                             "tf_keras.models.load_model; tf.keras itself on 2.15)")
    parser.add_argument("--portable", action="store_true",
                        help="with --estimator on TensorFlow 2.16+: build the model from "
                             "Keras's own layers only, so keras.models.load_model reads it "
                             "without estimator_dist (dense features; docs/migration.md)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace OUT if it is an earlier migrate output (default: "
                             "refuse); anything else is never replaced")
    _add_mapping_arguments(parser)
    return parser


def checked_output(output: str, source: str, overwrite: bool, *,
                   source_name: str = "model_dir") -> str:
    """Returns the real path of ``output`` once it proved safe to write.

    Refuses an ``output`` that is, holds or lies inside ``source`` (what migrate reads;
    symlinks resolved), and an existing one that migrate did not write.
    """
    output, source = os.path.realpath(output), os.path.realpath(source)
    if os.path.commonpath([output, source]) in (output, source):
        raise UsageError(f"output must be outside {source_name} and must not contain it "
                         f"(migrate only reads {source_name}). Received: output={output!r} "
                         f"for {source_name}={source!r}")
    return check_output(output, overwrite)


def _add_mapping_arguments(parser: argparse.ArgumentParser) -> None:
    """The mapping mode's flags, in their own group of the migrate parser."""
    group = parser.add_argument_group(
        "mapping mode", "convert the checkpoint of your own model_fn (instead of --model-dir)")
    group.add_argument("--checkpoint", metavar="DIR_OR_PREFIX",
                       help="a checkpoint prefix, or a directory (its latest checkpoint)")
    group.add_argument("--mapping", metavar="FILE",
                       help="JSON/YAML: Keras layer/weight -> checkpoint variable")
    group.add_argument("--keras-model", metavar="MODULE:FUNCTION",
                       help="a function returning the Keras model to fill")


def _mapping_mode(args: argparse.Namespace) -> bool:
    """Whether ``args`` ask for the mapping mode (checked: all of its flags, no model dir)."""
    flags = {"checkpoint": args.checkpoint, "mapping": args.mapping,
             "keras_model": args.keras_model}
    if not any(flags.values()):
        if args.model_dir is None:
            raise UsageError("model_dir must be given (or --checkpoint, --mapping and "
                             "--keras-model for your own model_fn). Received: neither")
        return False
    for name in ("model_dir", "estimator"):
        if getattr(args, name) is not None:
            raise UsageError(f"{name} must not be given with --checkpoint (the mapping "
                             f"mode). Received: {name}={getattr(args, name)!r}")
    missing = [f"--{name.replace('_', '-')}" for name, value in flags.items() if not value]
    if missing:
        raise UsageError(f"the mapping mode needs --checkpoint, --mapping and --keras-model. "
                         f"Received: no {', '.join(missing)}")
    return True


def _mapping_command(args: argparse.Namespace) -> int:
    """Converts and saves as the mapping mode's ``args`` say; returns the exit code."""
    mapping = checkpoint_mapping.load_mapping(args.mapping)
    logs.quiet_tensorflow(verbose=False)
    logs.tensorflow_python_logging(verbose=False)
    path = checkpoint_mapping.checkpoint_path(args.checkpoint)
    output = checked_output(args.output, os.path.dirname(os.path.abspath(path)),
                                    args.overwrite, source_name="the checkpoint's directory")
    model = checkpoint_mapping.build_keras_model(args.keras_model, args.keras)
    report = checkpoint_mapping.convert_or_raise(model, mapping, path)
    save(model, output, overwrite=args.overwrite)
    print(f"checkpoint  {path}")
    print("\n".join(report.lines()))
    print(f"saved       {output}")
    return 0


def _validate_migrate_args(args: argparse.Namespace) -> str:
    """Checks the flags before TensorFlow is imported; returns the real output path."""
    check_existing_dir("model_dir", args.model_dir)
    return checked_output(args.output, args.model_dir, args.overwrite)


def _describe(keras_model: Any) -> str:
    inputs, outputs = keras_model.input, keras_model.output
    return (f"{keras_model.name}: inputs {', '.join(inputs)}; "
            f"outputs {', '.join(outputs)}")


def _intact_checkpoint(model_dir: str) -> str:
    """The checkpoint a resume of ``model_dir`` would restore; warns when that is not the
    one its state file names."""
    from estimator_dist.job import checkpoints  # Late: loads TensorFlow.

    resume = checkpoints.inspect(model_dir)
    if resume.path is None:
        return latest_checkpoint(model_dir)  # Raises: no checkpoint.
    if resume.needs_fallback:
        print(f"warning: {checkpoints.describe(resume, doing='converting')} (the model dir "
              "is left as it is)", file=sys.stderr, flush=True)
    return resume.path


@eagerly
def migrate_command(args: argparse.Namespace) -> int:
    """Converts and saves as ``args`` say; returns the process exit code."""
    if args.portable and args.estimator is None:
        raise UsageError("portable needs --estimator (the other conversions build from "
                         "Keras's own layers already). Received: --portable without "
                         "--estimator")
    if _mapping_mode(args):
        return _mapping_command(args)
    output = _validate_migrate_args(args)
    logs.quiet_tensorflow(verbose=False)
    logs.tensorflow_python_logging(verbose=False)
    source = args.model_dir
    if args.estimator is not None:
        source = checkpoint_mapping.call_function("estimator", args.estimator)
        canned.check(source, args.portable)
    checkpoint = _intact_checkpoint(args.model_dir)
    keras_model = to_keras(source, checkpoint=checkpoint, keras=args.keras,
                           portable=args.portable)
    save(keras_model, output, overwrite=args.overwrite)
    print(f"checkpoint  {checkpoint}")
    print(f"keras model {_describe(keras_model)}")
    print(f"saved       {output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run(migrate_parser(), migrate_command, argv)
