"""Says once, early in a multi-worker run, when exchanging gradients costs more than the
extra workers' compute saves, and what would be faster.

A step of a synchronous multi-worker run computes on each worker's share of the global
batch, then exchanges the gradients in collectives (waiting there for the slowest peer).
One process would compute the whole global batch: N times a worker's compute, with no
exchange. So N workers beat one process only while a step's exchange stays under N - 1
times its compute. On a wide model at a small batch (a census-style trainer at batch 40
on two workers: a few ms of compute, several times that in collectives) it does not, and
nothing else says so.

``ExchangeAdviceHook`` (on the chief; the "multi_worker" strategy adds it to every
Estimator training spec it builds) fully traces every ``TRACE_EVERY_STEPS``-th step after
the first ``WARM_STEPS`` (``RunOptions.FULL_TRACE``: when each op of the step ran) until it
has ``TRACES``, splits each traced step's time into the time some collective was running
(the exchange, waits for peers included) and the time only other ops ran (the compute),
times the untraced
steps between them, and with the medians prints ``advice_line`` to stderr when the
exchange costs more than it saves. Only the process's first training traces (see
``_BEGUN``), so it says it at most once; other steps cost a clock read.
"""
from __future__ import annotations

import statistics
import sys
import threading
import time
from typing import Any, Iterable

import tensorflow as tf

WARM_STEPS = 10  # Steps before the first trace: graph rewrites, the rows' first guesses.
TRACES = 3
TRACE_EVERY_STEPS = 5

_SAID = threading.Event()  # Set once the process has said it (or would never say it).
# Set by the process's first training: only it traces (a full trace of a step of a later
# multi-worker strategy's training crashed TensorFlow 2.15 in TF2 behaviour, where each
# strategy re-creates the process's collective executors).
_BEGUN = threading.Event()


def intervals_length(intervals: Iterable[tuple[int, int]]) -> int:
    """The length of the union of ``[start, end)`` intervals."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def step_split(step_stats: Any, collectives: set[str]) -> tuple[float, float]:
    """(exchange ms, compute ms) of one traced step: the time some op of ``collectives``
    (node names) ran, and the time other ops ran while none of those did (gaps where no op
    ran, the executor's and the trace's own, are neither)."""
    spans, exchange = [], []
    for device in step_stats.dev_stats:
        for node in device.node_stats:
            if node.node_name in ("_SOURCE", "_SINK"):
                continue
            span = (node.all_start_micros, node.all_start_micros + node.all_end_rel_micros)
            spans.append(span)
            if node.node_name in collectives:
                exchange.append(span)
    exchanged = intervals_length(exchange)
    return exchanged / 1000, (intervals_length(spans) - exchanged) / 1000


def advice_line(workers: int, step_ms: float, exchange_ms: float,
                compute_ms: float) -> str | None:
    """The line to print when ``workers`` workers whose steps take ``step_ms``, traced as
    ``exchange_ms`` in collectives and ``compute_ms`` besides, are likely slower than one
    process on the same global batch (whose step would compute ``workers`` times as much
    and exchange nothing); None when they are likely faster."""
    saved_ms = (workers - 1) * compute_ms
    if exchange_ms <= saved_ms:
        return None
    return (f"estimator_dist: multi_worker: a step takes {step_ms:.1f} ms here; traced, it "
            f"spent {exchange_ms:.1f} ms exchanging gradients (waits for peers included) "
            f"and {compute_ms:.1f} ms computing, more than the {saved_ms:.1f} ms a step "
            f"that {workers} workers save against one process on the same global batch, so "
            f"one process is likely faster. Faster here: a larger per-worker batch (the "
            f"exchange stays, the compute grows), strategy "
            f"parameter_server (no barrier between workers), or one process "
            f"(docs/strategies.md, \"Wide models\").")


class ExchangeAdviceHook(tf.compat.v1.train.SessionRunHook):
    """Traces a few early steps of a ``workers``-worker run and prints ``advice_line``
    once when the exchange costs more than it saves (see the module docstring)."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._collectives: set[str] = set()
        self._step = 0
        self._splits: list[tuple[float, float]] = []
        self._tracing = False
        self._started: float | None = None  # When the last untraced step began.
        self._periods: list[float] = []  # Untraced steps' wall times, in ms.

    def begin(self) -> None:
        if _BEGUN.is_set():  # Not the process's first training: it traces nothing.
            return
        _BEGUN.set()
        graph = tf.compat.v1.get_default_graph()
        self._collectives = {op.name for op in graph.get_operations()
                             if op.type.startswith("Collective")}

    def before_run(self, run_context: Any) -> Any:
        self._step += 1
        now = time.perf_counter()
        if self._started is not None:
            self._periods.append((now - self._started) * 1000)
        self._started = None
        since = self._step - WARM_STEPS - 1
        self._tracing = since >= 0 and since % TRACE_EVERY_STEPS == 0
        if _SAID.is_set() or not self._collectives or since < 0:
            return None
        if not self._tracing:
            self._started = now
            return None
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        return tf.compat.v1.train.SessionRunArgs(None, options=options)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if _SAID.is_set() or not self._collectives or not self._tracing:
            return
        self._splits.append(step_split(run_values.run_metadata.step_stats, self._collectives))
        if len(self._splits) < TRACES:
            return
        _SAID.set()
        line = advice_line(self._workers, statistics.median(self._periods),
                           statistics.median(e for e, _ in self._splits),
                           statistics.median(c for _, c in self._splits))
        if line:
            print(line, file=sys.stderr, flush=True)
