"""What only a GPU machine can check, in one command: prints a table, exits 1 on a failure.

    python benchmarks/gpu_check.py [--steps 40] [--cpu]

On a machine with GPUs it checks:

* mirrored over every GPU: the cross-device reduction ``make_run_config("mirrored")``
  picks (NCCL expected on Linux), and the package's dense model_fn trained under it to the
  same eval loss as on one GPU (same global batch, 1e-3 relative);
* the package's LSTM kernel on ``/gpu:0``: outputs, final state and gradients against
  BasicLSTMCell + ``dynamic_rnn`` on the same GPU (TensorFloat-32 off), to 1e-5;
* mixed float16: the dense model_fn under ``mixed_precision="float16"`` trains to an
  eval loss within 2 % of float32 (or 0.02), its matmuls ran in float16, and its loss
  scale is in the checkpoint; mixed bfloat16 is refused on GPUs (TensorFlow 2.15's
  bfloat16 rewrite is for CPUs);
* the cuDNN LSTM path of docs/models.md: not built, so reported as such.

With no GPU it says so and exits 0. ``--cpu`` runs the same checks on CPU devices
instead, as far as a CPU goes (mirrored over 2 logical CPUs, the LSTM on ``/cpu:0``,
float16's loss scaling without the rewrite, bfloat16 through the oneDNN rewrite, or its
refusal on a CPU without bfloat16 units): it proves the script, not the GPU.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
from typing import Any, Callable, Sequence

import tensorflow as tf

# TF1 behaviour, as legacy scripts run: there a seeded run repeats exactly, so two runs
# can be compared (with TF2 behaviour two default runs start from different losses).
tf.compat.v1.disable_v2_behavior()

import numpy as np  # noqa: E402

import _timing  # noqa: E402
import estimator_dist  # noqa: E402
import lstm_candidates  # noqa: E402
from estimator_dist import precision  # noqa: E402
from estimator_dist.mends import internals, loss_scaling  # noqa: E402
from input_fns import from_arrays  # noqa: E402
from model_fns import dense_classifier_model_fn  # noqa: E402

v1 = tf.compat.v1
PARAMS = {"hidden_units": [256, 256], "num_classes": 2, "learning_rate": 0.01}
BATCH = 128
LSTM_TOLERANCE = 1e-5
SAME_LOSS = 1e-3  # Relative: mirrored against one device.
PRECISION_RELATIVE, PRECISION_ABSOLUTE = 0.02, 0.02
_HALF_MATMULS = ("MatMul:half", "_MklMatMul:bfloat16", "_MklNativeFusedMatMul:bfloat16",
                 "_FusedMatMul:half", "MatMul:bfloat16")


class _MatMulDtypes(tf.estimator.SessionRunHook):
    """The dtypes of the matmuls TensorFlow ran at the second step (after its rewrites)."""

    def __init__(self) -> None:
        self.found: set[str] = set()
        self._runs = 0

    def before_run(self, run_context: Any) -> Any:
        del run_context  # Fetches nothing.
        return tf.estimator.SessionRunArgs(
            {}, options=v1.RunOptions(output_partition_graphs=True))

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self._runs += 1
        if self._runs == 2:
            self.found = {f"{node.op}:{tf.as_dtype(node.attr['T'].type).name}"
                          for graph in run_values.run_metadata.partition_graphs
                          for node in graph.node if "MatMul" in node.op}


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(0)
    x = rng.randn(4096, 64).astype(np.float32)
    y = (x[:, :8].sum(axis=1) + 0.5 * rng.randn(4096) > 0).astype(np.int64)
    return x, y


def _train(strategy: str, steps: int, mixed_precision: str | None = None,
           force_float16: bool = False, **kwargs: Any) -> tuple[float, set[str], str, Any]:
    """Trains the dense model_fn; returns (eval loss, matmul dtypes, model dir, config)."""
    model_dir = _timing.scratch_dir("gpu_check-")
    config = estimator_dist.make_run_config(strategy, model_dir=model_dir, tf_random_seed=1,
                                            mixed_precision=mixed_precision, **kwargs)
    if force_float16:  # --cpu: float16's loss scaling, without the GPU rewrite.
        config.mixed_precision = "float16"
        loss_scaling.install()
    x, y = _data()
    estimator = tf.estimator.Estimator(dense_classifier_model_fn, config=config, params=PARAMS)
    matmuls = _MatMulDtypes()
    estimator.train(from_arrays({"x": x}, y, batch_size=BATCH, seed=0), max_steps=steps,
                    hooks=[matmuls])
    loss = estimator.evaluate(from_arrays({"x": x}, y, batch_size=BATCH, num_epochs=1,
                                          shuffle=False))["loss"]
    return float(loss), matmuls.found, model_dir, config


def check_mirrored(devices: Sequence[str], steps: int) -> tuple[bool, str]:
    one, _, _, _ = _train("default", steps)
    loss, _, _, config = _train("mirrored", steps, num_replicas=len(devices))
    reduction = type(internals.cross_device_ops(config.train_distribute)).__name__
    ok = abs(loss - one) <= SAME_LOSS * abs(one)
    return ok, (f"{len(devices)} replicas, reduction {reduction}; eval loss {loss:.4f} vs "
                f"{one:.4f} on one device")


def check_lstm(device: str) -> tuple[bool, str]:
    def on_device(run: lstm_candidates.Run) -> lstm_candidates.Run:
        @functools.wraps(run)
        def placed(*args: Any) -> Any:
            with tf.device(device):
                return run(*args)
        return placed

    tf.config.experimental.enable_tensor_float_32_execution(False)
    difference = lstm_candidates.max_difference(
        on_device(lstm_candidates.package_run),
        reference=on_device(lstm_candidates.dynamic_rnn_run))
    return difference <= LSTM_TOLERANCE, (f"max abs difference from dynamic_rnn on {device}: "
                                          f"{difference:.1e} (outputs, state, gradients)")


def _loss_scale(model_dir: str) -> Any:
    names = [n for n, _ in tf.train.list_variables(model_dir) if "loss_scale" in n]
    return tf.train.load_variable(model_dir, names[0]) if names else None


def check_precision(mixed: str, steps: int, on_cpu: bool) -> tuple[bool, str]:
    full, _, _, _ = _train("default", steps)
    force = on_cpu and mixed == "float16"
    loss, matmuls, model_dir, _ = _train("default", steps, None if force else mixed,
                                         force_float16=force)
    ok = abs(loss - full) <= max(PRECISION_RELATIVE * full, PRECISION_ABSOLUTE)
    lowered = sorted(m for m in matmuls if m in _HALF_MATMULS)
    detail = f"eval loss {loss:.4f} vs float32 {full:.4f}; matmuls {lowered or 'float32 only'}"
    if mixed == "float16":
        scale = _loss_scale(model_dir)
        ok = ok and scale is not None
        detail += f"; loss scale {scale}"
    if not force:
        ok = ok and bool(lowered)
    return ok, detail


def check_bfloat16_refused(gpus: Sequence[Any]) -> tuple[bool, str]:
    try:
        precision.check_device("bfloat16", gpus=gpus)
    except estimator_dist.UsageError as error:
        return True, f"refused: {str(error).split('. Received')[0]}"
    return False, "accepted: this machine was expected to refuse it"


def _checks(args: argparse.Namespace,
            gpus: Sequence[Any]) -> dict[str, Callable[[], tuple[bool, str]]]:
    if args.cpu:
        device, devices = "/cpu:0", ["/cpu:0", "/cpu:1"]
    else:
        device, devices = "/gpu:0", [g.name for g in gpus]
    checks: dict[str, Callable[[], tuple[bool, str]]] = {
        "mirrored": lambda: check_mirrored(devices, args.steps),
        "LSTM kernel vs dynamic_rnn": lambda: check_lstm(device),
        "mixed float16": lambda: check_precision("float16", args.steps, args.cpu)}
    if args.cpu and precision.bf16_cpu_features():
        checks["mixed bfloat16 (CPU)"] = lambda: check_precision("bfloat16", args.steps, True)
    elif args.cpu:  # No bfloat16 units: the refusal is what this CPU must give.
        checks["mixed bfloat16 (CPU)"] = lambda: check_bfloat16_refused([])
    else:
        checks["mixed bfloat16"] = lambda: check_bfloat16_refused(gpus)
    checks["cuDNN LSTM path"] = lambda: (True, "not built (designed in docs/models.md)")
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--cpu", action="store_true",
                        help="run the checks on CPU devices (proves the script, not a GPU)")
    args = parser.parse_args(argv)
    gpus = tf.config.list_physical_devices("GPU")
    print(f"TensorFlow {tf.__version__}; GPUs: {len(gpus)}; CPU bfloat16 units: "
          f"{', '.join(precision.bf16_cpu_features()) or 'none'}")
    if not gpus and not args.cpu:
        print("no GPU visible: nothing to check on this machine (--cpu runs the checks on "
              "CPU devices)")
        return 0
    if args.cpu:
        estimator_dist.setup_cpu_replicas(2)
    rows = []
    for name, check in _checks(args, gpus).items():
        try:
            ok, detail = check()
        except Exception as error:  # A row, not a crash.
            ok, detail = False, f"{type(error).__name__}: {str(error).splitlines()[0]}"
        rows.append((name, "ok" if ok else "FAIL", detail))
        print(f"  {name}: {rows[-1][1]}", flush=True)
    width = max(len(name) for name, _, _ in rows)
    print(f"\n{'check':<{width}}  result  detail")
    for name, result, detail in rows:
        print(f"{name:<{width}}  {result:<6}  {detail}")
    return 0 if all(result == "ok" for _, result, _ in rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
