"""The library apart from the commands: imports run from commands/ down, never up."""
import ast
import importlib
import pathlib
import subprocess
import sys

import pytest

import estimator_dist

_PACKAGE = pathlib.Path(estimator_dist.__file__).parent
_ENTRY_POINTS = ("train", "launch", "report", "migrate")


def _imported(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


@pytest.mark.parametrize("path", sorted(p.name for p in _PACKAGE.glob("*.py")
                                         if p.stem not in _ENTRY_POINTS))
def test_library_module_imports_no_command(path):
    found = [m for m in _imported(_PACKAGE / path) if m.startswith("estimator_dist.commands")]
    assert not found, f"{path} imports {found}"


@pytest.mark.parametrize("name", _ENTRY_POINTS)
def test_entry_point_runs_its_command(name):
    entry = importlib.import_module(f"estimator_dist.{name}")
    command = importlib.import_module(f"estimator_dist.commands.{name}")
    assert entry.main is command.main


def test_launcher_imports_nothing_that_starts_threads():
    """The launcher unshares a user namespace, which the kernel refuses to a process that
    runs threads; numpy (and TensorFlow) start threads when imported."""
    code = ("import sys; import estimator_dist.launch; "
            "print(sorted({'numpy', 'tensorflow'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"
