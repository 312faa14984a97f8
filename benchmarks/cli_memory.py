"""Peak memory (RSS) of the CLI's default job, with and without steps_per_run.

    python benchmarks/cli_memory.py [--rounds 3] [--max-steps N] [--model dense]

Runs ``python -m estimator_dist.train`` (built-in data, train, evaluate, export) once
per case in every round, alternating them, and reads each process's peak resident set
size from ``wait4``. Reports medians in MiB.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Sequence

CASES = {
    "default (steps_per_run on)": [],
    "--steps-per-run 1": ["--steps-per-run", "1"],
}


def peak_rss_mib(args: Sequence[str]) -> float:
    """Runs ``python ARGS``; returns its peak RSS in MiB (it must succeed)."""
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen([sys.executable, *args], stdout=log, stderr=log)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            log.seek(0)
            raise RuntimeError(f"{args} failed:\n{log.read()[-2000:]}")
    return usage.ru_maxrss / 1024  # Linux reports KiB.


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="dense")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="default: the model's own (the default job)")
    args = parser.parse_args(argv)
    print("command: python " + " ".join(sys.argv), flush=True)
    peaks: dict[str, list[float]] = {case: [] for case in CASES}
    for _ in range(args.rounds):
        for case, extra in CASES.items():
            with tempfile.TemporaryDirectory() as model_dir:
                steps = [] if args.max_steps is None else ["--max-steps", str(args.max_steps)]
                peaks[case].append(peak_rss_mib(
                    ["-m", "estimator_dist.train", "--model", args.model, "--model-dir",
                     os.path.join(model_dir, "run"), *steps, *extra]))
    for case, values in peaks.items():
        print(f"  {case:<28} peak RSS median {statistics.median(values):,.0f} MiB "
              f"({', '.join(f'{v:,.0f}' for v in values)})", flush=True)


if __name__ == "__main__":
    main()
