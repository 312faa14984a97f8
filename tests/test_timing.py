"""Each test's time is recorded for the suite's table (tests/timing.py,
benchmarks/suite_times.py)."""
import json

from benchmarks import suite_times
from tests.timing import TIMES_VARIABLE


def test_each_test_appends_its_wall_and_cpu_time(pytester, monkeypatch, tmp_path):
    times = tmp_path / "times.jsonl"
    monkeypatch.setenv(TIMES_VARIABLE, str(times))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # As outside pytest -n N.
    pytester.makepyfile(test_two="""
        import time
        def test_busy():
            end = time.process_time() + 0.3
            while time.process_time() < end:
                pass
        def test_sleeping():
            time.sleep(0.3)
        """)
    pytester.runpytest_inprocess("-p", "tests.timing", "-p", "no:cacheprovider").assert_outcomes(
        passed=2)
    rows = {row["test"]: row for row in map(json.loads, times.read_text().splitlines())}
    busy, sleeping = rows["test_two.py::test_busy"], rows["test_two.py::test_sleeping"]
    assert busy["cpu"] >= 0.25 and busy["wall"] >= 0.25
    assert sleeping["wall"] >= 0.25 and sleeping["cpu"] < 0.2
    assert busy["worker"] == "main"


def test_suite_table_sums_each_file():
    rows = [{"test": "a.py::t1", "wall": 1.0, "cpu": 2.0},
            {"test": "a.py::t2", "wall": 3.0, "cpu": 1.0},
            {"test": "b.py::t", "wall": 10.0, "cpu": 0.5}]
    assert suite_times.by_file(rows) == [("b.py", 1, 10.0, 0.5), ("a.py", 2, 4.0, 3.0)]
    table = suite_times.table(rows, top=1)
    assert "| `a.py` | 2 | 4 | 3 |" in table and "| all | 3 | 14 | 4 |" in table
    assert "| `b.py::t` | 10 | 0 |" in table
