"""``python -m estimator_dist.report``: training curves of a model dir as a PNG and a table.

    python -m estimator_dist.report --model-dir D --output curves.png

Reads the event files of the train run (``D``) and its evaluations (``D/eval``), draws
the training loss and the eval metrics over steps, one panel each, and prints a short
table. Needs matplotlib: ``pip install "estimator-dist[report]"``.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

from estimator_dist import run_record
from estimator_dist.commands import cli, logs
from estimator_dist.errors import UsageError, check_existing_dir, check_writable_path, os_fault

if TYPE_CHECKING:
    import argparse

_TRAIN_TAG = "loss"
_TABLE_ROWS = 8
# Tag -> its points, (step, value), in step order.
Curves = dict[str, list[tuple[int, float]]]


def report_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of the report command (standalone, or added to ``subparsers``)."""
    parser = cli.command_parser(
        "report", "Draw the training loss and eval metrics of a model dir over steps as a "
        "PNG and print them as a table.", subparsers)
    parser.add_argument("--model-dir", required=True,
                        help="the model dir of a train run (its event files are read)")
    parser.add_argument("--output", metavar="PNG",
                        help="where the PNG goes (default: MODEL_DIR/curves.png)")
    return parser


def _validate_report_args(args: argparse.Namespace) -> str:
    check_existing_dir("model_dir", args.model_dir)
    output = args.output or os.path.join(args.model_dir, "curves.png")
    if not output.lower().endswith(".png"):
        raise UsageError(f"output must be a .png path. Received: output={output!r}")
    check_writable_path("output", output, is_dir=False)
    return output


def read_curves(model_dir: str) -> tuple[Curves, Curves]:
    """(train, eval): tag -> [(step, value)] of the train loss and of every eval metric.

    Raises:
      UsageError: ``model_dir`` holds no training loss.
    """
    from estimator_dist.job import events  # Late: loads TensorFlow.

    train = {t: p for t, p in events.scalars(model_dir).items() if t == _TRAIN_TAG}
    if not train:
        raise UsageError(f"model_dir must hold the event files of a train run. "
                         f"Received: model_dir={model_dir!r} (no '{_TRAIN_TAG}' summaries)")
    evaluation = {t: p for t, p in events.scalars(os.path.join(model_dir, "eval")).items()
                  if t != "global_step"}
    return train, evaluation


def _title(model_dir: str) -> str:
    settings = run_record.recorded_settings(model_dir)
    return f"{settings['model']} in {model_dir}" if "model" in settings else model_dir


def draw(train: Curves, evaluation: Curves, output: str, title: str) -> None:
    """Writes the two panels (train, eval) to the PNG ``output``."""
    try:
        import matplotlib  # Late: optional (the report extra).
    except ImportError:
        raise UsageError('matplotlib must be installed to draw curves: pip install '
                         '"estimator-dist[report]". Received: no matplotlib') from None
    matplotlib.use("Agg")
    from matplotlib import pyplot  # Late: optional (the report extra).

    figure, (train_axes, eval_axes) = pyplot.subplots(1, 2, figsize=(11, 4))
    for axes, curves, name in ((train_axes, train, "train"), (eval_axes, evaluation, "eval")):
        for tag, points in sorted(curves.items()):
            steps, values = zip(*points)
            axes.plot(steps, values, marker="o" if len(points) < 20 else None, label=tag)
        axes.set_title(name if curves else f"{name}: no events")
        axes.set_xlabel("step")
        axes.grid(alpha=0.3)
        if curves:
            axes.legend()
    figure.suptitle(title)
    figure.tight_layout()
    try:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        figure.savefig(output, dpi=100)
    except OSError as error:
        raise os_fault("output", error, output) from None
    finally:
        pyplot.close(figure)


def table(train: Curves, evaluation: Curves) -> list[str]:
    """Rows of step, train loss (nearest step at or before) and each eval metric."""
    tags = sorted(evaluation)
    header = ["step", f"train {_TRAIN_TAG}"] + [f"eval {t}" for t in tags]
    train_points = train[_TRAIN_TAG]
    steps = sorted({s for points in evaluation.values() for s, _ in points})
    steps = steps or [train_points[-1][0]]
    rows = []
    for step in steps[-_TABLE_ROWS:]:
        before = [v for s, v in train_points if s <= step]
        cells = [str(step), f"{before[-1]:.4f}" if before else "-"]
        cells += [f"{dict(evaluation[t]).get(step, float('nan')):.4f}" for t in tags]
        rows.append(cells)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    return ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in [header] + rows]


def report_command(args: argparse.Namespace) -> int:
    output = _validate_report_args(args)
    logs.quiet_tensorflow(verbose=False)
    train, evaluation = read_curves(args.model_dir)
    draw(train, evaluation, output, _title(args.model_dir))
    print("\n".join(table(train, evaluation)))
    print(f"curves     {output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run(report_parser(), report_command, argv)
