"""Mixed precision for any model_fn: which one a run may use, and how it reaches the graph.

A model_fn is left as written; the precision reaches it from outside:

* "bfloat16" on a CPU: TensorFlow's oneDNN graph rewrite
  (``RewriterConfig.auto_mixed_precision_onednn_bfloat16``, set in the session config of
  ``make_run_config``) computes matmuls, convolutions and what lies between them in
  bfloat16. Variables, optimizer slots, the loss and the cross-replica reductions stay
  float32 (the rewrite casts at the edges; ``docs/precision.md`` shows the rewritten
  graph under mirrored and multi_worker). Only a CPU with bfloat16 units gains from it
  (``avx512_bf16`` or ``amx_bf16``); without them it is slower, so it is refused.
* "float16" on a GPU: TensorFlow's CUDA graph rewrite
  (``RewriterConfig.auto_mixed_precision``), and dynamic loss scaling of every v1
  optimizer the model_fn builds (``estimator_dist.mends.loss_scaling``).
* "bfloat16" on a TPU: the model_fn runs under ``tf.compat.v1.tpu.bfloat16_scope()``, so
  the bfloat16 variables it asks for are kept float32; on CPU validation
  (``use_tpu=False``) the oneDNN rewrite runs as for any CPU.

No TensorFlow at import: the settings of ``python -m estimator_dist.train`` check names
here before TensorFlow's logging is quieted.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    import tensorflow as tf

MIXED_PRECISIONS = ("bfloat16", "float16")
# CPU flags (as /proc/cpuinfo names them) of units that compute in bfloat16.
BF16_CPU_FEATURES = ("avx512_bf16", "amx_bf16")
CPUINFO = "/proc/cpuinfo"


def check_mixed_precision(value: str | None) -> str | None:
    """Returns ``value`` if it is None or one of ``MIXED_PRECISIONS``, else raises."""
    if value is not None and value not in MIXED_PRECISIONS:
        raise UsageError(f"mixed_precision must be None, 'bfloat16' or 'float16'. "
                         f"Received: mixed_precision={value!r}")
    return value


def bf16_cpu_features(cpuinfo: str = CPUINFO) -> tuple[str, ...]:
    """The ``BF16_CPU_FEATURES`` this machine's CPU has (empty when unknown)."""
    try:
        with open(cpuinfo, encoding="utf-8") as file:
            flags = set(" ".join(line.partition(":")[2] for line in file
                                 if line.startswith("flags")).split())
    except OSError:
        return ()
    return tuple(feature for feature in BF16_CPU_FEATURES if feature in flags)


def check_device(mixed_precision: str | None, *, tpu: bool = False,
                 gpus: Sequence[object] | None = None,
                 cpu_features: Sequence[str] | None = None) -> None:
    """Raises unless this machine computes ``mixed_precision`` faster than float32.

    ``gpus`` (default: the visible GPUs) and ``cpu_features`` (default: read from
    /proc/cpuinfo) are for tests.
    """
    import tensorflow as tf  # Late: loads TensorFlow.

    if mixed_precision is None:
        return
    gpus = tf.config.list_physical_devices("GPU") if gpus is None else gpus
    if mixed_precision == "float16":
        if tpu or not gpus:
            where = "strategy 'tpu'" if tpu else "no GPU visible"
            raise UsageError("mixed_precision 'float16' needs a GPU (on CPUs and TPUs use "
                             f"'bfloat16'). Received: mixed_precision='float16' with {where}")
        return
    if gpus and not tpu:
        raise UsageError(
            "mixed_precision 'bfloat16' must run on CPUs or TPUs: TensorFlow 2.15's bfloat16 "
            "graph rewrite leaves GPU ops in float32 (on GPUs use 'float16'). Received: "
            f"mixed_precision='bfloat16' with {len(gpus)} GPU(s) visible")
    features = bf16_cpu_features() if cpu_features is None else cpu_features
    if not tpu and not features:
        raise UsageError(
            "mixed_precision 'bfloat16' needs a CPU with bfloat16 units (avx512_bf16 or "
            "amx_bf16 in /proc/cpuinfo; without them it runs slower than float32). Received: "
            "mixed_precision='bfloat16' on a CPU with neither avx512_bf16 nor amx_bf16")


def with_rewrite(session_config: tf.compat.v1.ConfigProto,
                 mixed_precision: str | None) -> tf.compat.v1.ConfigProto:
    """Turns on, in ``session_config`` (a ``ConfigProto``, changed in place), the graph
    rewrite that computes in ``mixed_precision``; returns it."""
    # Late: loads TensorFlow.
    from tensorflow.core.protobuf import rewriter_config_pb2

    options = session_config.graph_options.rewrite_options
    if mixed_precision == "bfloat16":
        options.auto_mixed_precision_onednn_bfloat16 = rewriter_config_pb2.RewriterConfig.ON
    elif mixed_precision == "float16":
        options.auto_mixed_precision = rewriter_config_pb2.RewriterConfig.ON
    return session_config


def describe(mixed_precision: str | None) -> str:
    """A few words for the run's first line and ``doctor``: "float32", "mixed bfloat16"."""
    return "float32" if mixed_precision is None else f"mixed {mixed_precision}"

