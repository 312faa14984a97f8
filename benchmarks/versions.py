"""TensorFlow 2.15 against current TensorFlow: the same CLI runs on both ends, same run.

    python benchmarks/versions.py --pythons PY_2_15 PY_CURRENT [--rounds 3] [--scale 1.0]

Each case is ``python -m estimator_dist.train`` (the dense and LSTM model_fns, one device,
"mirrored" over 2 CPU replicas, two "multi_worker" workers through the launcher, and
bfloat16 mixed precision) run by each end's Python, the two ends alternating round by
round. A case's rate is the examples/s the CLI prints for its training (the chief's, on
two workers); the report gives each end's median and the median of the per-round
current/2.15 ratios. Each end's sgemm (2048³ float32 matmul, the compute ceiling) is
measured in the same rounds, so a ratio far from 1 can be read against the ceiling's.
The two Pythons need estimator-dist's dependencies; this checkout is put on their path.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from typing import Sequence

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RATE = re.compile(r"^(?:\[worker 0\] )?training +\d+ steps in [\d.]+ s: ([\d,]+) examples/s",
                   re.M)
_SGEMM = """
import time, numpy as np, tensorflow as tf
a = tf.constant(np.random.RandomState(0).rand(2048, 2048).astype(np.float32))
f = tf.function(lambda m: tf.reduce_sum(tf.matmul(m, m)))
f(a).numpy()
def seconds():
    start = time.perf_counter()
    f(a).numpy()
    return time.perf_counter() - start
print("GFLOPS", 2 * 2048 ** 3 / min(seconds() for _ in range(5)) / 1e9)
"""
# name -> (CLI flags, steps at scale 1, workers)
CASES = {
    "dense": (["--model", "dense"], 3000, 1),
    "lstm": (["--model", "lstm"], 150, 1),
    "dense mirrored-2": (["--model", "dense", "--strategy", "mirrored",
                          "--num-replicas", "2"], 1500, 1),
    "lstm mirrored-2": (["--model", "lstm", "--strategy", "mirrored",
                         "--num-replicas", "2"], 100, 1),
    "dense 2 workers": (["--model", "dense", "--strategy", "multi_worker"], 1500, 2),
    "dense bfloat16": (["--model", "dense", "--mixed-precision", "bfloat16"], 3000, 1),
}


def _run(python: str, args: Sequence[str], timeout: float = 900) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "PYTHONPATH")}
    env["PYTHONPATH"] = _ROOT
    result = subprocess.run([python, *args], capture_output=True, text=True, env=env,
                            cwd=_ROOT, timeout=timeout, check=False)
    if result.returncode:
        raise RuntimeError(f"{python} {' '.join(args)} exited {result.returncode}: "
                           f"{result.stderr[-1500:]}")
    return result.stdout


def case_rate(python: str, name: str, scale: float) -> float:
    """examples/s of case ``name`` run by ``python``."""
    flags, steps, workers = CASES[name]
    with tempfile.TemporaryDirectory() as model_dir:
        train = ["-m", "estimator_dist.train", *flags, "--no-export", "--model-dir", model_dir,
                 "--max-steps", str(max(2, int(steps * scale)))]
        if workers > 1:
            train = ["-m", "estimator_dist.launch", "--workers", str(workers), "--timeout",
                     "600", "--", python, *train]
        out = _run(python, train)
    match = _RATE.search(out)
    if match is None:
        raise RuntimeError(f"{python}: no training rate in the output of {name!r}:\n"
                           f"{out[-1500:]}")
    return float(match[1].replace(",", ""))


def sgemm(python: str) -> float:
    out = _run(python, ["-c", _SGEMM])
    match = re.search(r"^GFLOPS ([\d.]+)$", out, re.M)
    if match is None:
        raise RuntimeError(f"{python}: no GFLOPS line in the sgemm output:\n{out[-1500:]}")
    return float(match[1])


def _release(python: str) -> str:
    return _run(python, ["-c", "import tensorflow as tf; print(tf.__version__)"]).split()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pythons", nargs=2, required=True, metavar=("LEGACY", "CURRENT"),
                        help="the Python of TensorFlow 2.15, then of current TensorFlow")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every step count")
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    args = parser.parse_args(argv)
    releases = [_release(python) for python in args.pythons]
    print(f"TensorFlow {releases[0]} vs {releases[1]}; {args.rounds} rounds, alternating; "
          f"command: {' '.join(sys.argv)}")
    rates: dict[str, tuple[list[float], list[float]]] = {
        name: ([], []) for name in ["sgemm"] + args.cases}
    for _ in range(args.rounds):
        for name in ["sgemm"] + args.cases:
            for end, python in enumerate(args.pythons):
                rate = sgemm(python) if name == "sgemm" else case_rate(python, name,
                                                                         args.scale)
                rates[name][end].append(rate)
    print(f"{'case':<18}{releases[0]:>14}{releases[1]:>14}   ratio (median, per round)")
    for name, (legacy, current) in rates.items():
        ratios = [new / old for old, new in zip(legacy, current)]
        unit = "GFLOP/s" if name == "sgemm" else "ex/s"
        print(f"{name:<18}{statistics.median(legacy):>12,.0f} {unit[:2]}"
              f"{statistics.median(current):>12,.0f} {unit[:2]}   "
              f"x{statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
