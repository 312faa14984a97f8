"""Training hooks of the CLI: live progress with throughput, and a guard on checkpoints.

``ProgressHook`` shows one updating line in a terminal (tqdm), or plain periodic lines
when the output is not a terminal or ``CI`` is set: step / max steps, loss, examples/s,
steps/s and ETA. It counts only the steps run in this process, so a resumed run's rates
start at the restored global step, and it writes ``examples/sec`` and ``learning_rate``
summaries for TensorBoard. When TensorFlow re-creates the training session after an
error it treats as a preemption (a lost connection to a ps or a worker), it says so on
stderr, with the steps lost to the restore of the last checkpoint.
"""
from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from typing import IO, TYPE_CHECKING, Any, Callable, Mapping

import tensorflow as tf
import tqdm

if TYPE_CHECKING:
    from estimator_dist.hooks.preemption import PreemptionHook

v1 = tf.compat.v1

PLAIN_LINES = 10  # Plain mode prints about this many lines over a run,
_PLAIN_LINE_SECONDS = 60  # and at least one a minute.
_BAR_FORMAT = "step {n_fmt}/{total_fmt} |{bar}| {percentage:3.0f}% ETA {remaining}{postfix}"


def display_mode(stream: IO[str], environ: Mapping[str, str] | None = None) -> str:
    """"bar" for a terminal, "lines" for a pipe, a file or CI (``CI`` set)."""
    environ = os.environ if environ is None else environ
    isatty = getattr(stream, "isatty", lambda: False)
    return "bar" if isatty() and not environ.get("CI") else "lines"


@dataclasses.dataclass(frozen=True)
class Throughput:
    """What the steps run in this process achieved."""

    start_step: int  # The global step restored at the start.
    final_step: int
    seconds: float  # From the first step to the last, session set-up excluded.
    batch_size: int

    @property
    def steps(self) -> int:
        return self.final_step - self.start_step

    @property
    def examples_per_second(self) -> float:
        return self.steps * self.batch_size / self.seconds if self.steps and self.seconds else 0.0


def _loss_tensor() -> tf.Tensor | None:
    """The training loss: Estimator adds its (cross-replica) loss last to LOSSES."""
    losses = v1.get_collection(v1.GraphKeys.LOSSES)
    return losses[-1] if losses else None


def _format_loss(loss: float | None) -> str:
    return "n/a" if loss is None else f"{loss:.4f}"


class ProgressHook(tf.compat.v1.train.SessionRunHook):
    """Shows step / max steps, loss, examples/s, steps/s and ETA while training.

    Args:
      max_steps: the global step training ends at.
      batch_size: the global batch.
      mode: "bar", "lines" (see ``display_mode``) or None to show nothing.
      stream: where progress goes.
      summary_dir: where to write ``examples/sec`` and ``learning_rate``; None for none.
      summary_steps: steps between those summaries.
      learning_rate: the value written as the ``learning_rate`` summary.
      steps_per_run: global steps one Session.run may take.
    """

    def __init__(self, max_steps: int, batch_size: int, *, mode: str | None, stream: IO[str],
                 summary_dir: str | None = None, summary_steps: int = 100,
                 learning_rate: float | None = None, steps_per_run: int = 1) -> None:
        self._max_steps = max_steps
        self._batch_size = batch_size
        self._mode = mode
        self._stream = stream
        self._summary_dir = summary_dir
        self._summary_steps = summary_steps
        self._learning_rate = learning_rate
        self._steps_per_run = steps_per_run
        # What a session sets (None before the first): the fetches, the bar, the steps and
        # times counted from.
        self._fetches: Any
        self._bar: Any
        self._start_step: Any
        self._step: Any
        self._session_start: Any
        self._window_time: Any
        self._line_time: Any
        self._fetches = None
        self._sessions = 0
        self._bar = None
        self._start_step = self._step = None
        self._seconds = 0.0  # Training time of the sessions that ended.
        self._session_start = self._window_time = self._line_time = None
        self._window_step = 0
        self._loss = None

    @property
    def step(self) -> int | None:
        """The global step after the last step run (None before any session)."""
        return self._step

    @property
    def throughput(self) -> Throughput | None:
        """A ``Throughput`` of the sessions so far, or None when no step ran."""
        if self._start_step is None or self._step == self._start_step:
            return None
        return Throughput(self._start_step, self._step, self._seconds, self._batch_size)

    def begin(self) -> None:
        self._sessions = 0  # Sessions of this training call: more than one is a recovery.
        self._fetches = {"step": v1.train.get_global_step()}
        loss = _loss_tensor()
        if loss is not None:
            self._fetches["loss"] = loss

    def after_create_session(self, session: tf.compat.v1.Session,
                             coord: tf.train.Coordinator) -> None:
        del coord  # Unused.
        step = int(session.run(self._fetches["step"]))
        self._sessions += 1
        if self._sessions > 1:
            _report_recovery(self._step, step)
        self._step = self._window_step = step
        if self._start_step is None:
            self._start_step = self._step
        self._session_start = self._window_time = self._line_time = time.monotonic()
        if self._bar is not None:
            self._bar.unpause()  # Time between sessions (evaluation) is not training.
        elif self._mode == "bar" and self._step < self._max_steps:
            self._bar = tqdm.tqdm(total=self._max_steps, initial=self._step, file=self._stream,
                                  bar_format=_BAR_FORMAT, dynamic_ncols=True, leave=True)

    def before_run(self,
                   run_context: tf.estimator.SessionRunContext) -> tf.estimator.SessionRunArgs:
        del run_context  # Unused.
        return v1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context: tf.estimator.SessionRunContext,
                  run_values: tf.estimator.SessionRunValues) -> None:
        # The fetched step may be read before this run's increment: count runs instead,
        # or read it afresh when one run takes several steps.
        before = self._step
        self._step = max(self._step + 1, int(run_values.results["step"]))
        if self._steps_per_run > 1:
            self._step = int(run_context.session.run(self._fetches["step"]))
        self._loss = run_values.results.get("loss")
        if self._bar is not None:
            self._bar.set_postfix_str(self._rates_text(), refresh=False)
            self._bar.update(self._step - self._bar.n)
        elif self._mode == "lines" and self._due_plain_line(before):
            self._line_time = time.monotonic()
            print(self._plain_line(), file=self._stream, flush=True)
        if self._summary_dir and self._step // self._summary_steps > before // self._summary_steps:
            self._write_summaries()

    def end(self, session: tf.compat.v1.Session) -> None:
        self._step = int(session.run(self._fetches["step"]))
        self._seconds += time.monotonic() - self._session_start
        self._session_start = None

    def close(self) -> None:
        """Ends the display: closes the bar, or prints the last plain line."""
        if self._bar is not None:
            self._bar.set_postfix_str(self._rates_text(), refresh=False)
            self._bar.update(self._step - self._bar.n)
            self._bar.close()
            self._bar = None
        elif self._mode == "lines" and self.throughput is not None:
            print(self._plain_line(), file=self._stream, flush=True)

    def _elapsed(self) -> float:
        running = time.monotonic() - self._session_start if self._session_start else 0.0
        return max(self._seconds + running, 1e-9)

    def _steps_per_second(self) -> float:
        return (self._step - self._start_step) / self._elapsed()

    def _rates_text(self) -> str:
        steps_per_second = self._steps_per_second()
        return (f"loss {_format_loss(self._loss)}, "
                f"{steps_per_second * self._batch_size:,.0f} examples/s, "
                f"{steps_per_second:.1f} steps/s")

    def _due_plain_line(self, before: int) -> bool:
        if self._step >= self._max_steps:
            return False  # close() prints the last line.
        every = max(1, math.ceil((self._max_steps - self._start_step) / PLAIN_LINES))
        overdue = time.monotonic() - self._line_time >= _PLAIN_LINE_SECONDS
        crossed = (self._step - self._start_step) // every > (before - self._start_step) // every
        return crossed or overdue

    def _plain_line(self) -> str:
        steps_per_second = self._steps_per_second()
        remaining = (self._max_steps - self._step) / steps_per_second if steps_per_second else 0
        return (f"step {self._step}/{self._max_steps}  loss {_format_loss(self._loss)}  "
                f"{steps_per_second * self._batch_size:,.0f} examples/s  "
                f"{steps_per_second:.1f} steps/s  ETA {tqdm.tqdm.format_interval(remaining)}")

    def _write_summaries(self) -> None:
        now = time.monotonic()
        steps_per_second = (self._step - self._window_step) / max(now - self._window_time, 1e-9)
        self._window_step, self._window_time = self._step, now
        values = [v1.Summary.Value(tag="examples/sec",
                                   simple_value=steps_per_second * self._batch_size)]
        if self._learning_rate is not None:
            values.append(v1.Summary.Value(tag="learning_rate",
                                           simple_value=float(self._learning_rate)))
        writer = v1.summary.FileWriterCache.get(self._summary_dir)
        writer.add_summary(v1.Summary(value=values), self._step)
        writer.flush()


def _report_recovery(before: int, after: int) -> None:
    """One line on stderr: the session was re-created, and what the restore cost."""
    lost = (f": training resumed from the last checkpoint, at step {after:,}, and the "
            f"{before - after:,} steps since it are lost (save checkpoints more often with "
            "--save-checkpoints-steps to lose less)" if before > after
            else f"; training goes on from step {after:,}")
    print(f"TensorFlow re-created the training session after an error it treats as a "
          f"preemption (a lost connection to a ps or a worker; --verbose shows it){lost}.",
          file=sys.stderr, flush=True)


class SettleOnStopHook(tf.compat.v1.train.SessionRunHook):
    """The last training hook: once a session stopped by ``preemption`` (the run's
    ``PreemptionHook``) has ended its hooks, calls ``on_settled(words, saved)``.

    ``words()`` gives the stop's line (``str(Preempted)``); ``saved()`` tells whether the
    checkpoint of the stop step is written, for a task whose ``checkpoint_step()`` (the
    model dir's newest) shows it: the chief's save may come after this hook (under
    ``multi_worker`` TensorFlow runs the chief's saver after the training hooks, and drops
    ``TrainSpec.saving_listeners``). Without ``checkpoint_step`` (a task that writes no
    checkpoints), ``saved`` is None.
    """

    def __init__(self, preemption: PreemptionHook,
                 on_settled: Callable[[Callable[[], str], Callable[[], bool] | None], Any], *,
                 checkpoint_step: Callable[[], int] | None = None) -> None:
        self._preemption = preemption
        self._on_settled = on_settled
        self._checkpoint_step = checkpoint_step

    def end(self, session: tf.compat.v1.Session) -> None:
        del session  # Unused.
        stop = self._preemption.preempted
        if stop is None:
            return
        saved = None
        if self._checkpoint_step is not None:
            saved = lambda: self._checkpoint_step() >= stop.step  # noqa: E731
        self._on_settled(lambda: str(stop), saved)


class FiniteWeightsListener(tf.compat.v1.train.CheckpointSaverListener):
    """Refuses to save a checkpoint whose trainable weights are not all finite.

    A NaN loss stops training, but a checkpoint due at that very step could otherwise
    be written first and replace the last good one.
    """

    def __init__(self) -> None:
        self._all_finite = None

    def begin(self) -> None:
        weights = v1.trainable_variables()
        self._all_finite = tf.reduce_all(
            [tf.reduce_all(tf.math.is_finite(w)) for w in weights]) if weights else None

    def before_save(self, session: tf.compat.v1.Session, global_step_value: int) -> None:
        if self._all_finite is not None and not session.run(self._all_finite):
            raise v1.train.NanLossDuringTrainingError()
