"""Two workers against one: examples/s of a dense model as a local cluster grows.

    python benchmarks/scaling.py [--rounds 3] [--steps 200] [--batch 512 128]
                                 [--hidden-units 1024 1024] [--dim 64] [--kinds ...]
                                 [--plain-variants OPTIONS ...] [--package-variants OPTIONS ...]

Every case trains the same legacy model_fn (``tf.layers`` dense ``dim`` -> hidden units
-> 2, ``tf.losses`` cross-entropy, v1 Adam) at the same global batch, each process
pinned to its own core with ``taskset`` (the cores are used in turn when a case has more
processes than the machine has cores):

* ``1 process`` — no strategy, the whole global batch: the baseline.
* ``1 process, half batch`` — no strategy, one worker's share of the batch: what each
  worker computes when there are two, the step time two workers could reach if the
  all-reduce cost nothing and the other core sat idle.
* ``2 lone processes, half batch`` — two such processes at once, one per core, that
  never talk: what the machine gives two workers whose all-reduce cost nothing (the
  cores share caches, memory bandwidth and perhaps a physical core); the first one's
  steps are reported.
* ``plain TF 2 workers`` — ``tf.distribute.MultiWorkerMirroredStrategy``
  with its defaults under a plain ``tf.estimator.RunConfig`` and ``train_and_evaluate``.
* ``package 2 workers`` — ``estimator_dist.make_run_config("multi_worker")`` with its
  defaults; each ``--package-variants`` item (``NAME=VALUE,...``) adds a case with those
  options, each ``--plain-variants`` item a plain TF case with those
  ``CommunicationOptions``.
* ``parameter_server 2 workers + 1 ps`` — ``make_run_config("parameter_server")``:
  a chief and a worker stepping asynchronously, each on a worker's share of the batch.

The cases alternate within every round; each reports the median step time of the
chief's steps after ``--warmup`` (examples/s = global batch / median step time) and the
median of the per-round ratios to the baseline. Cluster cases also trace a few steps
(``RunMetadata``) on every worker and split the chief's step into compute (ops that
are not collectives), all-reduce (collective time after the last worker reached it),
waiting (collective time before the other worker reached it) and host (the
``Session.run`` time outside any op: hooks, feeding, fetching). Both workers run on one
machine, so their traces share a clock. Last, two pinned workers time a lone all-reduce
by size (``--no-collectives`` skips it): the constants of the ring model in
docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Mapping, Sequence, Union

# TensorFlow (and what loads it) is imported inside the functions that use it: a process
# loads it only for the part it runs (a task, or the driver's report).
TRACE_STEPS = 5
# Ops that move tensors between tasks (parameter_server's variables and gradients).
_TRANSFERS = ("_Recv", "_Send", "_HostRecv", "_HostSend")
# kind -> case name; --plain-variants and --package-variants add cases of their kind.
KINDS = {"alone": "1 process", "half": "1 process, half batch",
         "pair": "2 lone processes, half batch", "plain": "plain TF 2 workers",
         "package": "package 2 workers", "ps": "parameter_server 2 workers + 1 ps"}
BASELINE = KINDS["alone"]
# Options of --plain-variants (CommunicationOptions) and --package-variants.
# (name, kind, options) of a case.
Case = tuple[str, str, dict[str, Any]]
# (task type, index) of each task of a case; a task type of None: a process without TF_CONFIG.
Tasks = list[tuple[Union[str, None], int]]
_PLAIN_OPTION_TYPES: dict[str, Callable[[str], Any]] = {
    "bytes_per_pack": int, "timeout_seconds": float, "implementation": str}
_PACKAGE_OPTION_TYPES: dict[str, Callable[[str], Any]] = {
    "all_reduce_bytes_per_pack": int, "all_reduce_dtype": str, "steps_per_run": int,
    "threads": int}


# ---- one task: runs in a child process ------------------------------------------------

def _trace_summary(run_metadata: Any) -> dict[str, Any]:
    """(compute µs, first and last µs of the collectives — under parameter_server, of the
    variables' transfers —, first and last µs of any op)."""
    from estimator_dist.hooks.exchange_advice import intervals_length

    compute: list[tuple[int, int]] = []
    collectives: list[tuple[int, int]] = []
    for device in run_metadata.step_stats.dev_stats:
        for node in device.node_stats:
            span = (node.all_start_micros, node.all_start_micros + node.all_end_rel_micros)
            if node.node_name in ("_SOURCE", "_SINK"):
                continue
            # A label reads "name = OpType(inputs)".
            op_type = node.timeline_label.partition(" = ")[2].partition("(")[0]
            is_collective = op_type.startswith("Collective") or op_type in _TRANSFERS
            (collectives if is_collective else compute).append(span)
    every = compute + collectives
    return {"compute_us": intervals_length(compute),
            "collective": [min(s for s, _ in collectives), max(e for _, e in collectives)]
            if collectives else None,
            "ops": [min(s for s, _ in every), max(e for _, e in every)]}


def step_hook(total_steps: int, trace: bool) -> Any:
    """A hook recording every ``Session.run``'s wall time (µs since the epoch) and, when
    ``trace``, a RunMetadata summary of the last ``TRACE_STEPS`` runs."""
    import tensorflow as tf

    class StepHook(tf.estimator.SessionRunHook):
        def __init__(self) -> None:
            self.walls: list[list[float]] = []
            self.traces: list[dict[str, Any]] = []
            self._runs = 0

        def before_run(self, run_context: Any) -> Any:
            self._runs += 1
            self._traced = trace and self._runs > total_steps - min(TRACE_STEPS,
                                                                    total_steps // 2)
            options = (tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
                       if self._traced else None)
            self._start = time.time() * 1e6
            return tf.estimator.SessionRunArgs({}, options=options)

        def after_run(self, run_context: Any, run_values: Any) -> None:
            wall = [self._start, time.time() * 1e6]
            if self._traced:
                self.traces.append({"wall": wall, **_trace_summary(run_values.run_metadata)})
            else:
                self.walls.append(wall)

    return StepHook()


def _package_config(kind: str, spec: dict[str, Any]) -> Any:
    import estimator_dist
    options = dict(spec["options"])
    threads = options.pop("threads", None)
    kwargs: dict[str, Any] = {}
    if threads:
        import tensorflow as tf
        kwargs["session_config"] = tf.compat.v1.ConfigProto(
            inter_op_parallelism_threads=threads, intra_op_parallelism_threads=threads,
            allow_soft_placement=True)
    if kind == "parameter_server":
        options = {k: v for k, v in options.items() if k == "steps_per_run"}
    return estimator_dist.make_run_config(kind, **options, **kwargs, **_quiet())


def _quiet() -> dict[str, Any]:
    import _timing
    return {"model_dir": _timing.scratch_dir(), "save_checkpoints_secs": None,
            "save_checkpoints_steps": None, "save_summary_steps": None,
            "log_step_count_steps": 10**9}


def _config(spec: dict[str, Any]) -> Any:
    import tensorflow as tf
    system = spec["system"]
    if system == "alone":
        return tf.estimator.RunConfig(**_quiet())
    if system == "plain":
        options = dict(spec["options"])
        if "implementation" in options:
            options["implementation"] = tf.distribute.experimental.CommunicationImplementation[
                options["implementation"]]
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(**options))
        return tf.estimator.RunConfig(train_distribute=strategy, **_quiet())
    return _package_config("multi_worker" if system == "package" else "parameter_server", spec)


def run_collectives(spec: dict[str, Any]) -> None:
    """Times a lone all-reduce of each size in ``spec["sizes"]`` (float32 elements) on
    this worker; prints {size: median seconds} as one JSON line."""
    import tensorflow as tf
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    dtype = tf.dtypes.as_dtype(spec["dtype"])
    medians: dict[int, float] = {}
    for size in spec["sizes"]:
        with strategy.scope():
            tensor = tf.Variable(tf.ones([size]))  # float32: collectives broadcast it

        @tf.function
        def reduce() -> Any:
            return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, tf.cast(tf.identity(tensor), dtype))[:1])

        for _ in range(5):
            reduce()
        seconds: list[float] = []
        for _ in range(spec["steps"]):
            start = time.perf_counter()
            reduce().numpy()
            seconds.append(time.perf_counter() - start)
        medians[size] = statistics.median(seconds)
    print("TASK " + json.dumps(medians), flush=True)


def run_task(spec: dict[str, Any]) -> None:
    """Trains one task of a case and prints its step walls and traces as one JSON line."""
    import numpy as np
    import tensorflow as tf
    if spec.get("v1_behavior"):
        tf.compat.v1.disable_v2_behavior()
    import _timing
    config = _config(spec)
    if spec["system"] in ("package", "ps"):
        import estimator_dist
        estimator = estimator_dist.make_estimator(_timing.plain_mlp_model_fn, config, spec)
    else:
        estimator = tf.estimator.Estimator(_timing.plain_mlp_model_fn, config=config,
                                           params=spec)
    x = np.random.RandomState(0).randn(8192, spec["dim"]).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)

    def input_fn() -> Any:  # ignores input_context: each worker batches its own share
        data = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).cache().repeat()
        return data.batch(spec["batch"], drop_remainder=True).prefetch(2)

    runs = spec["steps"] // spec["options"].get("steps_per_run", 1)
    hook = step_hook(runs, trace=spec["system"] != "alone")
    if spec["system"] == "alone":
        estimator.train(input_fn, max_steps=spec["steps"], hooks=[hook])
    else:
        tf.estimator.train_and_evaluate(
            estimator, tf.estimator.TrainSpec(input_fn, max_steps=spec["steps"], hooks=[hook]),
            tf.estimator.EvalSpec(input_fn, steps=1, throttle_secs=10**6))
    print("TASK " + json.dumps({"walls": hook.walls, "traces": hook.traces,
                                "steps_per_run": spec["steps"] // runs}), flush=True)


# ---- the driver -----------------------------------------------------------------------

def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _cluster(kind: str) -> tuple[dict[str, int] | None, Tasks]:
    """(cluster dict or None, [(task type, index)]) of a case of ``kind``."""
    if kind in ("alone", "half"):
        return None, [(None, 0)]
    if kind == "pair":
        return None, [(None, 0), (None, 1)]
    if kind == "ps":
        return {"chief": 1, "worker": 1, "ps": 1}, [("ps", 0), ("chief", 0), ("worker", 0)]
    return {"worker": 2}, [("worker", 0), ("worker", 1)]


def _environment(tf_config: dict[str, Any] | None) -> dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    env.get("PYTHONPATH")) if p)
    if tf_config is None:
        env.pop("TF_CONFIG", None)
    else:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def run_tasks(layout: dict[str, int] | None, tasks: Tasks, spec: dict[str, Any], timeout: float,
              script: str = __file__) -> list[dict[str, Any]]:
    """Starts ``tasks`` of the cluster ``layout`` (None: one process, no TF_CONFIG), each
    training task pinned to the next core (a ps task on every core), each running
    ``script --task SPEC``, and returns the JSON records the training tasks print, chief
    first."""
    ports = iter(_free_ports(sum(layout.values()) if layout else 0))
    cluster = {kind: [f"127.0.0.1:{next(ports)}" for _ in range(n)]
               for kind, n in (layout or {}).items()}
    cores = os.cpu_count() or 1
    processes = []
    try:
        for number, (kind, index) in enumerate(tasks):
            tf_config = None if layout is None else {
                "cluster": cluster, "task": {"type": kind, "index": index}}
            core = f"0-{cores - 1}" if kind == "ps" else str(number % cores)
            command = ["taskset", "-c", core, sys.executable, os.path.abspath(script),
                       "--task", json.dumps(spec)]
            processes.append((kind, subprocess.Popen(
                command, env=_environment(tf_config), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)))
        records = []
        for kind, process in processes:
            if kind == "ps":
                continue
            out, err = process.communicate(timeout=timeout)
            if process.returncode != 0:
                raise RuntimeError(f"{spec['system']}: {kind} failed:\n{err[-3000:]}")
            records.append(json.loads(out.split("TASK ", 1)[1]))
        return records
    finally:
        for _, process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def run_case(case: Case, args: argparse.Namespace, global_batch: int) -> dict[str, Any]:
    """Runs ``case`` (name, kind, options) once and returns the chief's record (plus the
    other worker's traces under "peer_traces")."""
    _, kind, options = case
    spec = {"system": "alone" if kind in ("half", "pair") else kind,
            "batch": global_batch if kind == "alone" else global_batch // 2,
            "steps": args.steps, "dim": args.dim, "hidden_units": args.hidden_units,
            "options": options, "v1_behavior": args.v1_behavior}
    records = run_tasks(*_cluster(kind), spec, args.timeout)
    return {**records[0], "peer_traces": [r["traces"] for r in records[1:]]}


def measure_collectives(args: argparse.Namespace, sizes: Sequence[int],
                        dtype: str = "float32") -> dict[int, float]:
    """{elements: median seconds} of a lone all-reduce between two pinned workers (the
    slower worker's median)."""
    spec = {"system": "collectives", "sizes": sizes, "steps": args.steps, "dtype": dtype}
    records = run_tasks(*_cluster("plain"), spec, args.timeout)
    return {int(size): max(r[size] for r in records) for size in records[0]}


def step_seconds(record: dict[str, Any], warmup: int) -> float:
    """Median seconds per step of the record's ``Session.run``s after ``warmup`` steps."""
    per_run = record["steps_per_run"]
    walls = record["walls"][warmup // per_run:] or record["walls"]
    return statistics.median((end - start) / 1e6 / per_run for start, end in walls)


def breakdown(record: dict[str, Any]) -> dict[str, float]:
    """Median ms per traced ``Session.run``: compute, all-reduce, waiting, host (see the
    docstring)."""
    parts: dict[str, list[float]] = {"compute": [], "all-reduce": [], "waiting": [], "host": []}
    peers = record["peer_traces"][0] if record["peer_traces"] else []
    for i, trace in enumerate(record["traces"]):
        wall = trace["wall"][1] - trace["wall"][0]
        ops = trace["ops"][1] - trace["ops"][0]
        collective = trace["collective"]
        if collective and i < len(peers) and peers[i]["collective"]:
            reached = max(collective[0], peers[i]["collective"][0])
            waiting = max(0, reached - collective[0])
            reduce = max(0, collective[1] - reached)
        elif collective:
            waiting, reduce = 0, collective[1] - collective[0]
        else:
            waiting = reduce = 0
        parts["compute"].append(trace["compute_us"])
        parts["all-reduce"].append(reduce)
        parts["waiting"].append(waiting)
        parts["host"].append(max(0, wall - ops))
    return {name: statistics.median(v) / 1000 for name, v in parts.items() if v}


def _options(flag: str, text: str, types: Mapping[str, Callable[[str], Any]]) -> dict[str, Any]:
    """``NAME=VALUE,...`` of ``flag`` as a dict, each value of its name's type."""
    options: dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        if name not in types:
            raise SystemExit(f"{flag} must name one of {sorted(types)}. Received: {name}")
        options[name] = types[name](value)
    return options


def _cases(args: argparse.Namespace) -> list[Case]:
    """[(name, kind, options)] in the order they run within a round."""
    cases: list[Case] = [(KINDS[kind], kind, {}) for kind in KINDS
                         if kind in args.kinds or kind == "alone"]
    for kind, flag, variants, types in (
            ("plain", "--plain-variants", args.plain_variants, _PLAIN_OPTION_TYPES),
            ("package", "--package-variants", args.package_variants, _PACKAGE_OPTION_TYPES)):
        cases += [(f"{KINDS[kind]} ({text})", kind, _options(flag, text, types))
                  for text in variants]
    return cases


def _print_batch(global_batch: int, results: Mapping[str, Sequence[dict[str, Any]]],
                 args: argparse.Namespace) -> None:
    print(f"global batch {global_batch}: median step time and examples/s over "
          f"{args.rounds} rounds; x = median per-round ratio of examples/s to {BASELINE}")
    base = [step_seconds(r, args.warmup) for r in results[BASELINE]]
    for case, records in results.items():
        seconds = [step_seconds(r, args.warmup) for r in records]
        ratio = statistics.median(b / s for b, s in zip(base, seconds))
        spread = f"{min(b / s for b, s in zip(base, seconds)):.2f}-" \
                 f"{max(b / s for b, s in zip(base, seconds)):.2f}"
        print(f"  {case:<36} {statistics.median(seconds) * 1000:7.1f} ms/step "
              f"{global_batch / statistics.median(seconds):>9,.0f} examples/s   "
              f"x{ratio:.2f} ({spread})", flush=True)
    for case, records in results.items():
        if records[0]["traces"]:
            parts = [breakdown(r) for r in records]
            line = ", ".join(f"{name} {statistics.median(p[name] for p in parts):.1f}"
                             for name in parts[0])
            print(f"    {case} traced step (ms): {line}", flush=True)


def _print_collectives(args: argparse.Namespace, params: int) -> None:
    """Prints a lone all-reduce's median time by size, and the latency and bandwidth of a
    least-squares line through them (the constants of the ring model in
    docs/benchmarks.md)."""
    sizes = [1, 2**14, 2**18, params]
    rounds = [measure_collectives(args, sizes) for _ in range(args.rounds)]
    seconds = {size: statistics.median(r[size] for r in rounds) for size in sizes}
    half = statistics.median(measure_collectives(args, [params], "bfloat16")[params]
                             for _ in range(args.rounds))
    print("lone all-reduce between the two pinned workers (median of rounds of "
          f"{args.steps}):")
    for size, value in seconds.items():
        print(f"  {size * 4:>12,} bytes float32   {value * 1000:8.2f} ms")
    print(f"  {params * 2:>12,} bytes bfloat16  {half * 1000:8.2f} ms")
    mean_bytes = statistics.mean(4 * n for n in sizes)
    mean_seconds = statistics.mean(seconds.values())
    slope = (sum((4 * n - mean_bytes) * (seconds[n] - mean_seconds) for n in sizes)
             / sum((4 * n - mean_bytes) ** 2 for n in sizes))
    latency = mean_seconds - slope * mean_bytes
    print(f"  fit: {latency * 1000:.2f} ms + bytes / {1 / slope / 1e6:,.0f} MB/s", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20,
                        help="Session.runs left out of the step time")
    parser.add_argument("--batch", type=int, nargs="+", default=[512, 128],
                        help="global batch sizes (even)")
    parser.add_argument("--hidden-units", type=int, nargs="+", default=[1024, 1024])
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS),
                        help="cases to run (the 1 process baseline always runs)")
    parser.add_argument("--package-variants", nargs="*", default=[], metavar="NAME=VALUE,...",
                        help=f"more package cases, each with these make_run_config options: "
                             f"{', '.join(_PACKAGE_OPTION_TYPES)}")
    parser.add_argument("--plain-variants", nargs="*", default=[], metavar="NAME=VALUE,...",
                        help=f"more plain TF cases, each with these CommunicationOptions: "
                             f"{', '.join(_PLAIN_OPTION_TYPES)}")
    parser.add_argument("--no-collectives", dest="collectives", action="store_false",
                        help="skip the lone all-reduce timings")
    parser.add_argument("--v1-behavior", action="store_true")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.task:
        spec = json.loads(args.task)
        return (run_collectives if spec["system"] == "collectives" else run_task)(spec)
    cases = _cases(args)
    # SIGTERM unwinds like Ctrl-C, so that no task outlives the driver.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import _timing
    _timing.print_header()
    params = sum(a * b + b for a, b in zip([args.dim, *args.hidden_units],
                                           [*args.hidden_units, 2]))
    print(f"dense {args.dim} -> {args.hidden_units} -> 2 ({params:,} parameters), "
          f"{args.steps} steps per case, first {args.warmup} left out", flush=True)
    gflops: list[float] = []
    for global_batch in args.batch:
        results: dict[str, list[dict[str, Any]]] = {case[0]: [] for case in cases}
        for round_index in range(args.rounds):
            gflops.append(_timing.sgemm_gflops(repeats=2))
            for case in cases:
                results[case[0]].append(run_case(case, args, global_batch))
            line = ", ".join(f"{name} {global_batch / step_seconds(r[-1], args.warmup):,.0f}"
                             for name, r in results.items())
            print(f"  round {round_index + 1}: sgemm {gflops[-1]:.0f} GFLOP/s, examples/s: "
                  f"{line}", flush=True)
        _print_batch(global_batch, results, args)
    if args.collectives:
        _print_collectives(args, params)
    print(f"  sgemm {_timing.SGEMM_SIZE}^3 float32: median {statistics.median(gflops):.0f} "
          "GFLOP/s over the rounds (all cores)", flush=True)
    return None


if __name__ == "__main__":
    main()
