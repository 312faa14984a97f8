"""One owner of process exit: the library raises; the commands' entry ends the process, and
the guards' hard exits go through ``process_exit``."""
import ast
import pathlib

import pytest

import estimator_dist
from estimator_dist import process_exit
from tests.support import run_python

_PACKAGE = pathlib.Path(estimator_dist.__file__).parent
_LIBRARIES = (_PACKAGE, _PACKAGE.parent / "model_fns", _PACKAGE.parent / "input_fns")
# Each way of ending a process -> the one module that may use it (but SystemExit: below).
_OWNERS = {
    "os._exit": "estimator_dist/process_exit.py",
    "os.abort": "estimator_dist/process_exit.py",
    "faulthandler.dump_traceback_later": "estimator_dist/process_exit.py",
    "sys.exit": "estimator_dist/commands/cli.py",
    "SystemExit": "estimator_dist/commands/cli.py",
    "exit": "estimator_dist/commands/cli.py",
    "quit": "estimator_dist/commands/cli.py",
}


# process_exit's hook that ends a user's program on an uncaught TaskEnd raises SystemExit in
# sys.excepthook, the one way to set the exit code there.
_ALSO = {"SystemExit": ("estimator_dist/process_exit.py",)}


def _dotted(node):
    """"os._exit" for the expression ``os._exit``; None for anything but names and
    attributes of names."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return base and f"{base}.{node.attr}"
    return None


def _process_ends(tree):
    """(line, way) of every call that ends the process and every ``raise SystemExit``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func) in _OWNERS.keys() - {"SystemExit"}:
            yield node.lineno, _dotted(node.func)
        elif isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if _dotted(raised) == "SystemExit":
                yield node.lineno, "SystemExit"


def test_process_ends_only_in_their_owner_modules():
    found = []
    for root in _LIBRARIES:
        for path in sorted(root.rglob("*.py")):
            name = str(path.relative_to(_PACKAGE.parent))
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{name}:{line} {way}" for line, way in _process_ends(tree)
                      if name not in (_OWNERS[way], *_ALSO.get(way, ()))]
    assert not found


def test_process_ends_found_in_code_not_in_strings():
    tree = ast.parse("import os, sys\n"
                     "text = 'sys.exit(1)'\n"
                     "def f():\n"
                     "    os._exit(1)\n"
                     "    raise SystemExit(2)\n")
    assert sorted(_process_ends(tree)) == [(4, "os._exit"), (5, "SystemExit")]


def test_end_goes_to_the_program_handler():
    ended = []
    previous = process_exit.set_handler(lambda code, line: ended.append((code, line)))
    try:
        process_exit.end(3, "guard: why")  # Returns: the handler kept the process.
    finally:
        process_exit.set_handler(previous)
    assert ended == [(3, "guard: why")]
    assert previous is process_exit.exit_now


def test_exit_now_flushes_then_ends_with_code_and_line():
    code = ("from estimator_dist import process_exit\n"
            "print('buffered', end='')  # A pipe's stdout holds it until a flush.\n"
            "process_exit.exit_now(3, 'guard: why')\n"
            "print('never')\n")
    result = run_python(["-c", code], timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (3, "buffered",
                                                                 "guard: why\n")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("block, after, ended", [
    ("time.sleep(30)", "", (process_exit.JOIN_EXIT_CODE, "")),
    ("pass", "time.sleep(2)\nprint('ran on')\n", (0, "ran on\n")),
], ids=["outlasts", "in_time"])
def test_exit_after_ends_only_a_block_that_outlasts_it(block, after, ended):
    code = ("import time\n"
            "from estimator_dist import process_exit\n"
            "with process_exit.exit_after(1):\n"
            f"    {block}\n"
            f"{after}")
    result = run_python(["-c", code], timeout=30)
    assert (result.returncode, result.stdout + result.stderr) == ended
