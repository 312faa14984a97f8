"""Long runs of every strategy: do threads, memory, open files, speed and the model dir
stay flat?

    python benchmarks/soak.py                       # every case, 600 s each
    python benchmarks/soak.py --seconds 60 --cases multi_worker default
    python benchmarks/soak.py --work-dir soak-runs   # keep every model dir and log

Each case trains for ``--seconds`` (the CLI's dense model under each strategy, its lstm
model on one device, tests/end_to_end/legacy/'s finite_input_epochs: train/evaluate by epochs, TF1
behaviour, and, as the peer, the dense model under a plain Estimator and RunConfig:
``plain-tf default``), while every ``--interval`` seconds this samples each of its
processes (the launcher and every task): threads (/proc/PID/task), RSS, open fds, and the model
dir: its size without events files, its events files' size, and the global step read
from the events (steps/s). It prints one row per case and task, and exits 1 when a
quantity grows without bound (a slope over the second half of the run that would add
more than ``GROWTH_LIMITS`` in an hour, and more than ``MIN_GROWTH`` over that half) or
steps/s falls by more than 20 % (the last quarter against the second quarter, each from
the steps it gained). Events files grow with every summary by design: their rate is
printed, not judged.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterator, Mapping, Sequence

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TRAIN = [sys.executable, "-m", "estimator_dist.train", "--no-export",
          "--max-steps", "100000000", "--save-checkpoints-steps", "100000"]
_LAUNCH = [sys.executable, "-m", "estimator_dist.launch"]
_LEGACY = "finite_input_epochs"
# The legacy program's train/evaluate loop by epochs, run for as many epochs as time allows.
_LEGACY_MAIN = ("import sys; from tests.end_to_end.legacy import runner; "
                f"from tests.end_to_end.legacy.programs import {_LEGACY} as program; "
                "program.EPOCHS = 10**6; sys.exit(runner.main(sys.argv[1:]))")
CASES = {
    "default": _TRAIN + ["--model", "dense", "--strategy", "default"],
    "mirrored-2": _TRAIN + ["--model", "dense", "--strategy", "mirrored", "--num-replicas", "2"],
    "multi_worker": _LAUNCH + ["--workers", "2", "--"] + _TRAIN + [
        "--model", "dense", "--strategy", "multi_worker"],
    "parameter_server": _LAUNCH + ["--workers", "2", "--ps", "1", "--evaluator", "--"] + _TRAIN
    + ["--model", "dense", "--strategy", "parameter_server"],
    "tpu-validate": _TRAIN + ["--model", "dense", "--strategy", "tpu", "--tpu-validate"],
    "lstm": _TRAIN + ["--model", "lstm", "--strategy", "default"],
    f"legacy {_LEGACY}": [sys.executable, "-c", _LEGACY_MAIN, _LEGACY, "--behaviour", "tf1",
                          "--strategy", "default"],
    # The peer: the dense model under a plain Estimator and RunConfig (no config, mend or
    # hook of estimator_dist).
    "plain-tf default": [sys.executable, os.path.join(_REPO, "benchmarks",
                                                      "_plain_estimator.py")],
}
# Per hour over the second half of a run: more than this is growth without bound.
GROWTH_LIMITS = {"threads": 20, "rss_mib": 100, "fds": 20, "dir_mib": 50}
# ... and by more than this over the judged half: a step of a few threads that a lazily
# started pool adds once is no growth, however short the run.
MIN_GROWTH = {"threads": 10, "rss_mib": 32, "fds": 10, "dir_mib": 8}
MAX_SLOWDOWN = 0.2
# One sample: its time "t" (seconds from the start) and what was measured then.
Sample = dict[str, float]


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for path in _listdir(f"/proc/{current}/task"):
            try:
                with open(f"/proc/{current}/task/{path}/children", encoding="ascii") as f:
                    todo.extend(int(child) for child in f.read().split())
            except OSError:
                pass
    return found


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def task_name(pid: int) -> str | None:
    """"worker 1" (from its TF_CONFIG), or its program's name, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    if b"TF_CONFIG" in environ:
        task = json.loads(environ[b"TF_CONFIG"]).get("task", {})
        return f"{task.get('type')} {task.get('index')}"
    for flag in (b"-m", b"-c"):  # python -m MODULE, python -c CODE PROGRAM
        if flag in argv:
            return argv[argv.index(flag) + (1 if flag == b"-m" else 2)].decode().rsplit(".")[-1]
    if len(argv) > 1 and argv[1].endswith(b".py"):  # python SCRIPT
        return os.path.basename(argv[1].decode())[:-3]
    return os.path.basename(argv[0].decode())


def sample_process(pid: int) -> Sample | None:
    """{"threads", "rss_mib", "fds"} of ``pid``, or None when it is gone."""
    try:
        threads = len(os.listdir(f"/proc/{pid}/task"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None
    return {"threads": threads, "rss_mib": rss / 1024, "fds": fds}


class EventSteps:
    """The global step of the newest training event in a model dir, read incrementally
    (it goes back when training restores an older checkpoint)."""

    def __init__(self, model_dir: str) -> None:
        self._model_dir = model_dir
        self._offsets: dict[str, int] = {}
        self._last: dict[str, int] = {}  # Events file -> the step of its last event.

    def read(self) -> int:
        # TensorFlow's own copy of the proto: 2.16+ no longer installs tensorboard.
        from tensorflow.core.util import event_pb2
        for root, _, files in os.walk(self._model_dir):
            for name in files:
                if "tfevents" in name and os.sep + "eval" not in root:
                    path = os.path.join(root, name)
                    for record in self._records(path):
                        event = event_pb2.Event.FromString(record)
                        if event.step or event.HasField("summary"):
                            self._last[path] = event.step
        # Events files are named by their creation time: the last name is the newest.
        return self._last[max(self._last, key=os.path.basename)] if self._last else 0

    def _records(self, path: str) -> Iterator[bytes]:
        with open(path, "rb") as f:
            f.seek(self._offsets.get(path, 0))
            while True:
                header = f.read(12)
                if len(header) < 12:
                    break
                length = struct.unpack("<Q", header[:8])[0]
                data = f.read(length + 4)
                if len(data) < length + 4:
                    break
                self._offsets[path] = f.tell()
                yield data[:length]


def dir_sizes(model_dir: str) -> tuple[float, float]:
    """(MiB without events files, MiB of events files) under ``model_dir``."""
    rest = events = 0
    for root, _, files in os.walk(model_dir):
        for name in files:
            try:
                size = os.path.getsize(os.path.join(root, name))
            except OSError:
                continue
            if "tfevents" in name:
                events += size
            else:
                rest += size
    return rest / 2**20, events / 2**20


def slope_per_hour(times: Sequence[float], values: Sequence[float]) -> float:
    """The least-squares slope of ``values`` over ``times`` (seconds), per hour."""
    mean_t, mean_v = statistics.fmean(times), statistics.fmean(values)
    spread = sum((t - mean_t) ** 2 for t in times)
    if not spread:
        return 0.0
    return 3600 * sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values)) / spread


def run_case(name: str, command: list[str], seconds: float, interval: float, work_dir: str,
             max_threads: int | None = None) -> dict[str, Any]:
    """Runs one case for ``seconds`` (less when a task passes ``max_threads``); returns
    {"tasks": {task: [samples]}, "dir": [...], "ended": exit code or None, "log": path}."""
    model_dir = os.path.join(work_dir, name.replace(" ", "_"))
    env = dict(os.environ, PYTHONPATH=_REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TF_CONFIG", None)
    with open(model_dir + ".log", "w", encoding="utf-8") as log:
        process = subprocess.Popen(command + ["--model-dir", model_dir], cwd=_REPO, env=env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    tasks: dict[str, list[Sample]] = {}
    directory: list[Sample] = []
    steps = EventSteps(model_dir)
    start = time.monotonic()
    most: float = 0
    try:
        while (time.monotonic() - start < seconds and process.poll() is None
               and (max_threads is None or most < max_threads)):
            time.sleep(interval)
            now = time.monotonic() - start
            for pid in descendants(process.pid):
                sample, task = sample_process(pid), task_name(pid)
                if sample and task:
                    tasks.setdefault(f"{task} ({pid})", []).append(dict(sample, t=now))
                    most = max(most, sample["threads"])
            rest, events = dir_sizes(model_dir)
            directory.append({"t": now, "dir_mib": rest, "events_mib": events,
                              "step": steps.read()})
    finally:
        ended = process.poll()
        _stop(process)
    return {"tasks": tasks, "dir": directory, "ended": ended, "log": model_dir + ".log",
            "log_tail": _tail(model_dir + ".log") if ended is not None else []}


def _tail(path: str, lines: int = 30) -> list[str]:
    """The last ``lines`` lines of the file ``path``."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()[-lines:]


def _stop(process: subprocess.Popen[bytes]) -> None:
    for signum, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            pass


def _training_start(directory: Sequence[Sample]) -> float:
    """When the first step showed in the events (the start-up before it is not judged)."""
    return next((s["t"] for s in directory if s["step"]), directory[-1]["t"] if directory else 0)


def _second_half(samples: Sequence[Sample], start: float) -> list[Sample]:
    """The samples of the second half of the time from ``start`` on."""
    end = samples[-1]["t"] if samples else 0
    return [s for s in samples if s["t"] >= (start + end) / 2]


def _rate(samples: Sequence[Sample]) -> float:
    """Steps/s from the first to the last of ``samples``."""
    if len(samples) < 2 or samples[-1]["t"] <= samples[0]["t"]:
        return 0.0
    return (samples[-1]["step"] - samples[0]["step"]) / (samples[-1]["t"] - samples[0]["t"])


def _half_slope(half: Sequence[Sample], key: str) -> float:
    """The slope per hour of ``key`` over the samples ``half`` (0 for too few samples)."""
    if len(half) < 3:
        return 0.0
    return slope_per_hour([s["t"] for s in half], [s[key] for s in half])


def _grows(key: str, slope: float, half: Sequence[Sample]) -> bool:
    """Whether ``slope`` (per hour) over the samples ``half`` is growth without bound."""
    span = (half[-1]["t"] - half[0]["t"]) / 3600 if half else 0.0
    return slope > GROWTH_LIMITS[key] and slope * span > MIN_GROWTH[key]


def _steps_back(directory: Sequence[Sample]) -> list[str]:
    """A line for each time the global step went back (training restored a checkpoint)."""
    lines: list[str] = []
    before: float = 0
    for sample in directory:
        if sample["step"] < before:
            lines.append(f"the global step went back from {before:,} to {sample['step']:,} "
                         f"at {sample['t']:.0f} s (training restored an older checkpoint)")
        before = sample["step"]
    return lines


def most_threads(result: dict[str, Any]) -> int:
    """The most threads any task of ``result`` had in a sample."""
    return max((s["threads"] for samples in result["tasks"].values() for s in samples),
               default=0)


def judge(result: dict[str, Any],
          max_threads: int | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, faults): one row per task and one for the model dir; faults as lines."""
    rows: list[dict[str, Any]] = []
    faults: list[str] = []
    directory = result["dir"]
    start = _training_start(directory)
    for task, samples in sorted(result["tasks"].items()):
        half = _second_half(samples, start)
        row: dict[str, Any] = {"task": task, "samples": len(samples)}
        for key, limit in GROWTH_LIMITS.items():
            if key == "dir_mib":
                continue
            values = [s[key] for s in samples]
            slope = _half_slope(half, key)
            row[key] = (values[0], values[-1], max(values), slope)
            if _grows(key, slope, half):
                faults.append(f"{task}: {key} grows {slope:.0f} per hour (limit {limit})")
        rows.append(row)
    half = _second_half(directory, start)
    dir_slope = _half_slope(half, "dir_mib")
    if _grows("dir_mib", dir_slope, half):
        faults.append(f"model dir grows {dir_slope:.0f} MiB per hour without its events")
    training = [s for s in directory if s["t"] >= start]
    quarter = len(training) // 4
    early = _rate(training[quarter:2 * quarter + 1]) if quarter else 0.0
    late = _rate(training[-quarter - 1:]) if quarter else 0.0
    if early and late < (1 - MAX_SLOWDOWN) * early:
        faults.append(f"steps/s fell from {early:.1f} to {late:.1f}")
    for back in _steps_back(directory):
        faults.append(back)
    if max_threads and most_threads(result) >= max_threads:
        faults.append(f"a task reached {most_threads(result):,} threads (stopped at "
                      f"--max-threads {max_threads})")
    if result["ended"] is not None:
        tail = "\n    ".join(result.get("log_tail", []))
        faults.append(f"the run ended early with exit code {result['ended']}; the last "
                      f"lines of {result['log']}:\n    {tail}")
    last = directory[-1] if directory else {"dir_mib": 0, "events_mib": 0, "step": 0, "t": 1}
    rows.append({"task": "model dir", "start": start, "dir_mib": last["dir_mib"],
                 "dir_slope": dir_slope, "events_mib": last["events_mib"],
                 "events_rate": _half_slope(half, "events_mib"), "steps": last["step"],
                 "early": early, "late": late})
    return rows, faults


def print_case(name: str, seconds: int, rows: Sequence[dict[str, Any]],
               faults: Sequence[str]) -> None:
    print(f"\n{name}: {seconds} s, {'FLAT' if not faults else 'GROWS'}")
    print(f"  {'task':<22} {'threads first/last/max, /h':>28} {'RSS MiB first/last/max, /h':>30}"
          f" {'fds first/last/max, /h':>24}")
    for row in rows:
        if "threads" in row:
            cells = [f"{a:.0f}/{b:.0f}/{c:.0f}, {d:+.0f}" for a, b, c, d in
                     (row["threads"], row["rss_mib"], row["fds"])]
            print(f"  {row['task']:<22} {cells[0]:>28} {cells[1]:>30} {cells[2]:>24}")
        else:
            print(f"  first step after {row['start']:.0f} s; judged from then on")
            print(f"  model dir: {row['dir_mib']:.1f} MiB without events ({row['dir_slope']:+.1f}"
                  f" MiB/h), events {row['events_mib']:.1f} MiB ({row['events_rate']:+.1f} MiB/h);"
                  f" step {row['steps']:,}; steps/s {row['early']:.1f} (2nd quarter) -> "
                  f"{row['late']:.1f} (last quarter)")
    for fault in faults:
        print(f"  FAULT: {fault}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=600, help="per case (default 600)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--max-threads", type=int,
                        help="stop a case at once when a task has this many threads (the "
                             "machine's pid_max is shared by every process on it)")
    parser.add_argument("--json", help="also write every sample to this file")
    parser.add_argument("--work-dir", help="keep each case's model dir and log here (by "
                                           "default they go with a temporary directory)")
    parser.add_argument("--from-json", help="judge the samples of an earlier --json run "
                                            "instead of running anything")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            return report(json.load(f), args)
    everything: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="soak-") as temporary:
        work_dir = args.work_dir or temporary
        os.makedirs(work_dir, exist_ok=True)
        for name in args.cases:
            everything[name] = run_case(name, CASES[name], args.seconds, args.interval,
                                        work_dir, args.max_threads)
            report({name: everything[name]}, args)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(everything, f)
    return report(everything, args, quiet=True)


def report(results: Mapping[str, dict[str, Any]], args: argparse.Namespace,
           quiet: bool = False) -> int:
    """Judges each case of ``results``, prints it unless ``quiet``; returns the exit code."""
    failed = False
    for name, result in results.items():
        rows, faults = judge(result, args.max_threads)
        if not quiet:
            seconds = round(max((s["t"] for s in result["dir"]), default=0))
            print_case(name, seconds, rows, faults)
        failed = failed or bool(faults)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
