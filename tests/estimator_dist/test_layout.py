"""The layout of the code: imports run down the layers (estimator_dist's rooms, model_fns and
input_fns alone at the bottom), at import and call time, without a cycle; the launcher
starts no thread at import; docs/architecture.md lists every module."""
import ast
import re
import importlib
import pathlib
import subprocess
import sys

import pytest

import estimator_dist

_PACKAGE = pathlib.Path(estimator_dist.__file__).parent
# The three top-level packages; model_fns and input_fns import nothing of the others.
_LIBRARIES = (_PACKAGE, _PACKAGE.parent / "model_fns", _PACKAGE.parent / "input_fns")
_ENTRY_POINTS = ("train", "launch", "report", "migrate", "doctor")
_STANDALONE = ("model_fns", "input_fns")


def _type_checking_only(tree):
    """The nodes under ``if TYPE_CHECKING:``, which never run."""
    return {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
            and getattr(block.test, "id", None) == "TYPE_CHECKING"
            for statement in block.body for node in ast.walk(statement)}


def _string_constants(tree):
    """The module's ``NAME = "text"`` assignments, NAME -> text."""
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for target in node.targets if isinstance(target, ast.Name)}


def _imported_by_name(node, constants):
    """The module an ``importlib.import_module(NAME)`` call imports, when NAME is a string or
    a module-level string constant; else None."""
    if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
            and node.args):
        return None
    name = node.args[0]
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        return name.value
    return constants.get(name.id) if isinstance(name, ast.Name) else None


def _imported(path, modules=()):
    """The modules ``path`` imports when it runs (at import or call time, by ``import`` or
    by ``importlib.import_module`` of a name it spells out). ``from P import m`` of a
    submodule ``P.m`` (one of ``modules``) imports ``P.m``, not what ``P`` holds."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    never_run = _type_checking_only(tree)
    constants = _string_constants(tree)
    for node in ast.walk(tree):
        if id(node) in never_run:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            if not all(name in modules for name in names):
                yield node.module
            yield from names
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif _imported_by_name(node, constants):
            yield _imported_by_name(node, constants)


def _module_name(path):
    parts = path.relative_to(_PACKAGE.parent).with_suffix("").parts  # The repository root.
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(roots=(_PACKAGE,)):
    """Module of the packages at ``roots`` -> the modules of those it imports (anywhere)."""
    modules = {_module_name(p): p for root in roots for p in root.rglob("*.py")}
    return {name: {m for m in _imported(path, modules) if m in modules and m != name}
            for name, path in modules.items()}


def _cycle_through(graph, start):
    path, seen = [(start, iter(sorted(graph[start])))], {start}
    while path:
        node, children = path[-1]
        child = next(children, None)
        if child is None:
            path.pop()
        elif child == start:
            return [n for n, _ in path] + [start]
        elif child not in seen:
            seen.add(child)
            path.append((child, iter(sorted(graph[child]))))
    return None


def test_import_graph_has_no_cycle():
    graph = _import_graph(_LIBRARIES)
    cycles = [c for c in (_cycle_through(graph, name) for name in sorted(graph)) if c]
    assert not cycles, " -> ".join(cycles[0])


def _library_files():
    """The library's modules (paths under estimator_dist/), the commands and entry points
    left out."""
    paths = (p.relative_to(_PACKAGE) for p in _PACKAGE.rglob("*.py"))
    return sorted(str(p) for p in paths if p.stem not in _ENTRY_POINTS
                  and "commands" not in p.parts)


@pytest.mark.parametrize("path", _library_files())
def test_library_module_imports_no_command(path):
    found = [m for m in _imported(_PACKAGE / path) if m.startswith("estimator_dist.commands")]
    assert not found, f"{path} imports {found}"


@pytest.mark.parametrize("name", _ENTRY_POINTS)
def test_entry_point_runs_its_command(name):
    entry = importlib.import_module(f"estimator_dist.{name}")
    command = importlib.import_module(f"estimator_dist.commands.{name}")
    assert entry.main is command.main


def _supervisor_modules():
    return sorted(_module_name(p) for p in (_PACKAGE / "supervisor").glob("*.py"))


@pytest.mark.parametrize("module", ["estimator_dist.launch", *_supervisor_modules()])
def test_launcher_imports_nothing_that_starts_threads(module):
    """The launcher unshares a user namespace, which the kernel refuses to a process that
    runs threads; numpy (and TensorFlow) start threads when imported."""
    code = (f"import sys; import {module}; "
            "print(sorted({'numpy', 'tensorflow'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


# The layers, from the bottom: a module imports from its own layer and those below only
# (docs/architecture.md, "Layers"); a room of estimator_dist is its first folder or module
# name, model_fns and input_fns are rooms of their own. A module in no layer fails the test
# until placed.
_LAYERS = (
    _STANDALONE,
    ("errors", "config_files", "run_record", "models", "datasets", "export", "precision",
     "checkpoint_step", "run_config_facts", "process_exit", "remote_files", "callables",
     "training_end", "ps_stop"),
    ("mends",),
    ("installation",),
    ("hooks",),
    ("distribute",),
    ("estimator",),
    ("plan",),
    ("conversion",),
    ("supervisor",),
    ("job",),
    ("commands",),
    _ENTRY_POINTS,
)


def _room(module):
    package, _, rest = module.partition(".")
    return rest.split(".")[0] if package == "estimator_dist" else package


def _layer(module):
    return next(i for i, names in enumerate(_LAYERS) if _room(module) in names)


def test_every_module_has_a_layer():
    unplaced = [m for m in _import_graph(_LIBRARIES) if m != "estimator_dist"
                and not any(_room(m) in names for names in _LAYERS)]
    assert not unplaced


def test_imports_run_down_the_layers():
    graph = _import_graph(_LIBRARIES)
    upward = [f"{module} -> {imported}" for module, imports in sorted(graph.items())
              if module != "estimator_dist" for imported in sorted(imports)
              if imported != "estimator_dist" and _layer(imported) > _layer(module)]
    assert not upward


def test_model_fns_and_input_fns_import_only_themselves():
    """Either package can be taken alone into another codebase."""
    graph = _import_graph(_LIBRARIES)
    found = [f"{module} -> {imported}" for module, imports in sorted(graph.items())
             if _room(module) in _STANDALONE for imported in sorted(imports)
             if _room(imported) != _room(module)]
    assert not found


def _documented_modules():
    """The modules docs/architecture.md's table of modules lists (paths under the package)."""
    text = (_PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text.split("## The modules", 1)[1].split("\n## ", 1)[0]
    cells = [row.split("|")[1] for row in table.splitlines() if row.startswith("| `")]
    return {name for cell in cells for name in re.findall(r"`([\w/]+\.py)`", cell)}


def test_architecture_lists_every_module():
    on_disk = {str(p.relative_to(_PACKAGE)) for p in _PACKAGE.rglob("*.py")}
    documented = _documented_modules()
    assert (sorted(on_disk - documented), sorted(documented - on_disk)) == ([], [])


def test_public_api_spelled_out_for_static_tools():
    """``estimator_dist/__init__.py`` imports every lazily loaded name under
    TYPE_CHECKING, from the module ``_EXPORTS`` loads it from."""
    tree = ast.parse((_PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    guarded = next(node for node in tree.body if isinstance(node, ast.If)
                   and getattr(node.test, "id", None) == "TYPE_CHECKING")
    imported = {alias.name: node.module for node in guarded.body
                for alias in node.names}
    assert imported == estimator_dist._EXPORTS
