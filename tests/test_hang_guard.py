"""A test hung with the GIL held, beyond pytest-timeout's reach, ends its process
(tests/hang_guard.py)."""
import time

from tests.hang_guard import grace_seconds
from tests.support import REPO_ROOT


def test_a_test_that_holds_the_gil_past_its_limit_ends_its_process(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))  # For -p tests.hang_guard.
    # ctypes.PyDLL calls C without releasing the GIL: pytest-timeout's thread never runs.
    pytester.makepyfile(test_hung="""
        import ctypes
        def test_hung():
            ctypes.PyDLL(None).sleep(120)
        """)
    start = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "tests.hang_guard", "-o", "timeout=2",
                                           "-o", "timeout_method=thread",
                                           "-p", "no:cacheprovider", timeout=100)
    took = time.monotonic() - start
    assert result.ret != 0
    assert any(line.startswith("Timeout (0:00:12)!") for line in result.errlines), result.errlines
    assert "test_hung" in result.stderr.str()
    assert 2 + grace_seconds(2) <= took < 90


def test_the_grace_grows_with_the_limit():
    assert grace_seconds(2) == 10 and grace_seconds(300) == 60
