"""The tree passes the lint configuration of pyproject.toml (ruff: pycodestyle, pyflakes)."""
import os
import shutil
import subprocess
import sys

from tests.support import REPO_ROOT


def test_ruff_finds_nothing():
    # The ruff of the test extra sits beside this interpreter; a venv need not be active.
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    assert ruff, "ruff must be installed for the lint test: pip install '.[test]'"
    result = subprocess.run([ruff, "check", "--no-cache", REPO_ROOT], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
