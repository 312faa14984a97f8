"""The tree passes the lint configuration of pyproject.toml (ruff: pycodestyle, pyflakes),
the packages and the benchmark scripts pass its type check (mypy), and every public
function of them says its types."""
import ast
import os
import pathlib
import shutil
import subprocess
import sys

from tests.support import REPO_ROOT

# What pyproject.toml's [tool.mypy] files names: the packages, the interpreter-start hook
# and the benchmark scripts.
_TYPED = ("estimator_dist", "estimator_dist_startup.py", "model_fns", "input_fns", "benchmarks")


def test_ruff_finds_nothing():
    # The ruff of the test extra sits beside this interpreter; a venv need not be active.
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    assert ruff, "ruff must be installed for the lint test: pip install '.[test]'"
    result = subprocess.run([ruff, "check", "--no-cache", REPO_ROOT], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_mypy_finds_nothing(tmp_path):
    """mypy as pyproject.toml configures it (the directories it names, every function typed),
    with a fresh cache, against the TensorFlow and numpy installed here."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert "No module named mypy" not in result.stderr, (
        "mypy must be installed for the type check: pip install '.[test]'")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def _public(name):
    """Public: no leading underscore, or a special method (``__init__``, ``__call__``)."""
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _untyped(function, method):
    """Whether ``function`` leaves a parameter (but a method's ``self`` or ``cls``) or its
    return without an annotation."""
    arguments = function.args
    parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                  *filter(None, (arguments.vararg, arguments.kwarg))]
    if method and parameters and parameters[0].arg in ("self", "cls"):
        parameters = parameters[1:]
    return function.returns is None or any(p.annotation is None for p in parameters)


def _unannotated(source):
    """The public functions and methods (of public classes) in a module's ``source`` that
    leave a type out, by name: ``function``, ``Class.method``."""
    found = []

    def visit(body, prefix, method):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if _public(node.name) and _untyped(node, method):
                    found.append(prefix + node.name)
            elif isinstance(node, ast.ClassDef) and _public(node.name):
                visit(node.body, f"{prefix}{node.name}.", True)
            elif isinstance(node, ast.If):  # Definitions that depend on a version.
                visit(node.body + node.orelse, prefix, method)

    visit(ast.parse(source).body, "", False)
    return found


def _public_modules():
    """The modules of the typed directories without a leading underscore in their path (a
    package's ``__init__.py`` is its public face)."""
    root = pathlib.Path(REPO_ROOT)
    for package in _TYPED:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).parts
            if not any(part.startswith("_") for part in parts[:-1] + (path.stem,)
                       if part != "__init__"):
                yield path


def test_public_functions_are_annotated():
    missing = [f"{path.relative_to(REPO_ROOT)}: {name}" for path in _public_modules()
               for name in _unannotated(path.read_text(encoding="utf-8"))]
    assert not missing, "annotate every parameter and the return of:\n" + "\n".join(missing)


def test_public_modules_leave_out_the_private_ones():
    modules = {str(path.relative_to(REPO_ROOT)) for path in _public_modules()}
    assert {"estimator_dist/__init__.py", "estimator_dist/plan.py",
            "model_fns/lstm.py", "benchmarks/scaling.py"} <= modules
    assert not modules & {"model_fns/_heads.py", "estimator_dist/conversion/_keras_models.py",
                          "benchmarks/_timing.py"}


def test_typed_directories_are_what_mypy_checks():
    text = (pathlib.Path(REPO_ROOT) / "pyproject.toml").read_text(encoding="utf-8")
    files = next(line for line in text.splitlines() if line.startswith("files = "))
    assert ast.literal_eval(files.partition("=")[2].strip()) == list(_TYPED)



def test_unannotated_names_what_leaves_a_type_out():
    source = '''
def typed(a: int, *rest: str, key: bool = False, **options: float) -> int: ...
def no_return(a: int): ...
def no_parameter_type(a, b: int) -> None: ...
def no_keyword_type(*, key=1) -> None: ...
def no_rest_type(*rest) -> None: ...
def _private(a): ...
class Thing:
    def __init__(self, size) -> None: ...
    def method(self, x: int) -> int: ...
    def no_return(self, x: int): ...
    @classmethod
    def build(cls, size: int) -> "Thing": ...
    def _helper(self, y): ...
class _Hidden:
    def method(self, z): ...
'''
    assert _unannotated(source) == ["no_return", "no_parameter_type", "no_keyword_type",
                                    "no_rest_type", "Thing.__init__", "Thing.no_return"]
