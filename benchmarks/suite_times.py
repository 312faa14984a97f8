"""The test suite's time by file, from the lines ``tests/timing.py`` writes.

    ESTIMATOR_DIST_TEST_TIMES=times.jsonl pytest -n 2
    python benchmarks/suite_times.py times.jsonl [--top 15]

Prints a Markdown table: per test file its tests, their wall time and the CPU time they
used (their own processes included), the files by wall time; then the slowest tests. The
wall times of tests that ran on several workers at once add up to more than the run took:
the CPU column says what a file costs the machine. docs/testing.md keeps the table.
"""
from __future__ import annotations

import argparse
import collections
import json
from typing import Iterable, Sequence


def read(paths: Iterable[str]) -> list[dict]:
    """The timing lines of the files ``paths``."""
    rows: list[dict] = []
    for path in paths:
        with open(path, encoding="utf-8") as file:
            rows.extend(json.loads(line) for line in file if line.strip())
    return rows


def by_file(rows: Sequence[dict]) -> list[tuple[str, int, float, float]]:
    """(file, tests, wall seconds, CPU seconds) per test file, the slowest first."""
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for row in rows:
        total = totals[row["test"].split("::")[0]]
        total[0] += 1
        total[1] += row["wall"]
        total[2] += row["cpu"]
    return sorted(((name, int(t[0]), t[1], t[2]) for name, t in totals.items()),
                  key=lambda entry: -entry[2])


def table(rows: Sequence[dict], top: int) -> str:
    """The Markdown table of ``rows`` by file, and the ``top`` slowest tests."""
    lines = ["| file | tests | wall (s) | CPU (s) |", "| --- | ---: | ---: | ---: |"]
    files = by_file(rows)
    lines += [f"| `{name}` | {count} | {wall:,.0f} | {cpu:,.0f} |"
              for name, count, wall, cpu in files]
    lines.append(f"| all | {sum(f[1] for f in files)} | {sum(f[2] for f in files):,.0f} | "
                 f"{sum(f[3] for f in files):,.0f} |")
    lines += ["", "| slowest tests | wall (s) | CPU (s) |", "| --- | ---: | ---: |"]
    slowest = sorted(rows, key=lambda row: -row["wall"])[:top]
    lines += [f"| `{row['test']}` | {row['wall']:,.0f} | {row['cpu']:,.0f} |"
              for row in slowest]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="files of timing lines (tests/timing.py)")
    parser.add_argument("--top", type=int, default=15, help="slowest tests listed")
    args = parser.parse_args(argv)
    print(table(read(args.files), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
