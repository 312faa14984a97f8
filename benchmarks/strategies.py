"""Training throughput of the built-in models under each local strategy.

    python benchmarks/strategies.py [--rounds 3] [--steps 300]

Runs ``python -m estimator_dist.train`` once per (model, strategy) in every round,
alternating them so that machine noise (tens of percent here) hits all alike, and
prints the median examples/s of each and its median ratio to "default" in the same
round. The examples/s are the CLI's own: steps run in the process times the global
batch, over the training time only.
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile

CASES = {
    "default": ["--strategy", "default"],
    "mirrored-2": ["--strategy", "mirrored", "--num-replicas", "2"],
    "mirrored-4": ["--strategy", "mirrored", "--num-replicas", "4"],
    "tpu-validate": ["--strategy", "tpu", "--tpu-validate"],
}
_RATE = re.compile(r"^training .*: ([\d,]+) examples/s", re.MULTILINE)


def examples_per_second(model: str, case: str, steps: int) -> float:
    with tempfile.TemporaryDirectory() as model_dir:
        result = subprocess.run(
            [sys.executable, "-m", "estimator_dist.train", "--model", model, "--max-steps",
             str(steps), "--model-dir", model_dir, "--no-export", *CASES[case]],
            capture_output=True, text=True, timeout=900, check=True)
    match = _RATE.search(result.stdout)
    if match is None:
        raise RuntimeError(f"{model} {case}: no examples/s line in the output:\n"
                           f"{result.stdout[-2000:]}")
    return float(match.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--models", nargs="+", default=["dense", "lstm"])
    args = parser.parse_args(argv)
    for model in args.models:
        rates: dict[str, list[float]] = {case: [] for case in CASES}
        for _ in range(args.rounds):
            for case in CASES:
                rates[case].append(examples_per_second(model, case, args.steps))
        print(f"\n{model}: median examples/s over {args.rounds} rounds, {args.steps} steps")
        for case, values in rates.items():
            ratios = [v / d for v, d in zip(values, rates["default"])]
            print(f"  {case:<13} {statistics.median(values):>10,.0f}   "
                  f"x{statistics.median(ratios):.2f} of default")


if __name__ == "__main__":
    main()
