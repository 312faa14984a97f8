"""Step time of the dense model as a local cluster grows: 1, 2, 3 workers, and a ps cluster.

    python benchmarks/cluster_scaling.py [--rounds 3] [--steps 300]

Every case runs ``python -m estimator_dist.train --model dense`` under
``python -m estimator_dist.launch`` on 127.0.0.1 with the same batch per worker (weak
scaling: the global batch grows with the workers), alternating the cases in every round
so that machine noise hits all alike. It prints the median step time and examples/s of
each, and the median per-round ratios of its step time to one process with no strategy
and to one multi_worker worker.
The machine has 2 cores, so 3 workers also measure oversubscription, not only the
network: read the ratios, not the absolute numbers.
"""
import argparse
import re
import statistics
import subprocess
import sys
import tempfile

PER_WORKER_BATCH = 64
# name -> (launcher flags, training workers, train flags); None: no launcher.
CASES = {
    "default": (None, 1, ["--strategy", "default"]),
    "multi_worker-1": (["--workers", "1"], 1, ["--strategy", "multi_worker"]),
    "multi_worker-2": (["--workers", "2"], 2, ["--strategy", "multi_worker"]),
    "multi_worker-3": (["--workers", "3"], 3, ["--strategy", "multi_worker"]),
    "parameter_server-2+1ps": (["--workers", "2", "--ps", "1"], 2,
                               ["--strategy", "parameter_server"]),
}
_TRAINING = re.compile(r"training +(\d+) steps in ([\d.]+) s: ([\d,]+) examples/s")


def measure(case, steps):
    """(seconds per step, examples/s) the chief reports for one run of ``case``."""
    launcher, workers, flags = CASES[case]
    # Parameter-server workers step asynchronously, each on a whole batch.
    batch = PER_WORKER_BATCH if case.startswith("parameter_server") else PER_WORKER_BATCH * workers
    with tempfile.TemporaryDirectory() as model_dir:
        train = [sys.executable, "-m", "estimator_dist.train", "--model", "dense",
                 "--max-steps", str(steps), "--batch-size", str(batch), "--model-dir",
                 model_dir, "--no-export", *flags]
        command = train if launcher is None else [
            sys.executable, "-m", "estimator_dist.launch", *launcher, "--timeout", "900",
            "--", *train]
        result = subprocess.run(command, capture_output=True, text=True, timeout=960,
                                check=True)
    done = _TRAINING.search(result.stdout)
    step_count, seconds, rate = int(done[1]), float(done[2]), float(done[3].replace(",", ""))
    return seconds / step_count, rate


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    args = parser.parse_args(argv)
    results = {case: [] for case in args.cases}
    for _ in range(args.rounds):
        for case in args.cases:
            results[case].append(measure(case, args.steps))
    bases = [case for case in ("default", "multi_worker-1") if case in results]
    print(f"dense model, {PER_WORKER_BATCH} examples per worker step, {args.steps} steps, "
          f"medians over {args.rounds} rounds; step time ratios to {' and '.join(bases)} "
          "in the same round")
    for case, values in results.items():
        ratios = "  ".join(
            f"x{statistics.median(v[0] / b[0] for v, b in zip(values, results[base])):.2f}"
            for base in bases)
        print(f"  {case:<24} {statistics.median(v[0] for v in values) * 1000:7.1f} ms/step "
              f"{statistics.median(v[1] for v in values):>9,.0f} examples/s   {ratios}")


if __name__ == "__main__":
    main()
