"""A run's temporary files stay in its own directory (tests/scratch.py), and so do the
locks by which its workers share the machine (tests/sharing.py)."""
import pytest

from tests.sharing import RUN_ID
from tests.support import REPO_ROOT

_TEST_WRITES = """
    import subprocess
    import sys
    import tempfile

    import pytest

    @pytest.mark.parametrize("i", range(2))
    def test_writes_temporary_files(i):
        tempfile.mkdtemp()
        subprocess.run([sys.executable, "-c", "import tempfile; tempfile.mkstemp()"],
                       check=True, timeout=60)
    """


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one_process", "two_workers"])
def test_a_run_writes_nothing_in_the_machines_temporary_directory(pytester, monkeypatch,
                                                                 workers):
    machine_tmp = pytester.mkdir("machine-tmp")
    monkeypatch.setenv("TMPDIR", str(machine_tmp))
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))  # For -p tests.scratch.
    monkeypatch.delenv(RUN_ID, raising=False)  # This run's own, if it runs on workers.
    pytester.makepyfile(test_writes=_TEST_WRITES)
    result = pytester.runpytest_subprocess("-p", "tests.sharing", "-p", "tests.scratch",
                                           "-p", "no:cacheprovider", *workers, timeout=120)
    result.assert_outcomes(passed=2)
    assert not list(machine_tmp.iterdir())
    base = pytester.path / "runpytest-current"  # The run's --basetemp.
    assert len(list(base.glob("**/tmp/tmp*"))) == 4  # A directory and a file per test.
    locks = sorted(path.name for path in base.glob("estimator-dist-tests.*"))
    assert locks == (["estimator-dist-tests.tests", "estimator-dist-tests.turnstile"]
                     if workers else [])
