"""The Dockerfile installs what setup.py pins, and is the image the docs build and the
manifests run (docker cannot pull base images here, so nothing is built)."""
import ast
import pathlib
import re

import yaml

from tests.support import REPO_ROOT

_ROOT = pathlib.Path(REPO_ROOT)
_PIN = re.compile(r'"(?P<name>[\w.\[\]-]+)(?P<spec>[=<>]=?[\w.*,<>=]+)"')


def _setup_call():
    """setup.py's module-level assignments and the keywords of its ``setup(...)`` call,
    as Python values."""
    tree = ast.parse((_ROOT / "setup.py").read_text(encoding="utf-8"))
    names = {node.targets[0].id: node.value for node in tree.body
             if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    call = next(node.value for node in tree.body if isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call) and node.value.func.id == "setup")

    def value(node):
        if isinstance(node, ast.BinOp):  # list + list
            return value(node.left) + value(node.right)
        return ast.literal_eval(names[node.id]) if isinstance(node, ast.Name) else (
            [value(element) for element in node.elts] if isinstance(node, ast.List)
            else ast.literal_eval(node))

    return {keyword.arg: value(keyword.value) for keyword in call.keywords
            if keyword.arg in ("version", "install_requires", "python_requires",
                               "py_modules", "data_files")}


def _requirements(pins, python):
    """"tensorflow-cpu==2.15.1; python_version < '3.12'" -> {"tensorflow-cpu": "==2.15.1"}
    for the pins whose marker holds on ``python`` ("3.11")."""
    found = {}
    for pin in pins:
        requirement, _, marker = pin.partition(";")
        held = re.fullmatch(r'\s*python_version (<|>=) "(\d+\.\d+)"\s*', marker)
        if marker and not (_version(python) < _version(held[2])) == (held[1] == "<"):
            continue
        name, spec = re.fullmatch(r"([\w.\[\]-]+)(.*)", requirement.strip()).groups()
        found[name] = spec
    return found


def _dockerfile():
    return (_ROOT / "Dockerfile").read_text(encoding="utf-8")


def _image_python():
    return re.search(r"^FROM python:(\d+\.\d+)-", _dockerfile(), re.MULTILINE)[1]


def _gpu_pins():
    gpu = re.search(r"^\s*gpu\)(?P<command>.*?);;", _dockerfile(), re.MULTILINE | re.DOTALL)
    return {m["name"]: m["spec"] for m in _PIN.finditer(gpu["command"])}


def test_dockerfile_cpu_installs_like_readme_first_command():
    first = (_ROOT / "README.md").read_text(encoding="utf-8").split("```")[1]
    assert "pip install ." in first.splitlines()[1]
    cpu = re.search(r"^\s*cpu\)(?P<command>.*?);;", _dockerfile(), re.MULTILINE | re.DOTALL)
    assert cpu["command"].split() == ["pip", "install", "--no-cache-dir", "."]
    assert re.search(r"^ARG TENSORFLOW=cpu$", _dockerfile(), re.MULTILINE)


def test_dockerfile_gpu_pins_match_setup_py():
    required = _requirements(_setup_call()["install_requires"], _image_python())
    gpu = _gpu_pins()
    assert "tensorflow-cpu" not in required
    assert gpu["tensorflow[and-cuda]"] == required["tensorflow"] == ">=2.16,<2.22"
    assert required["tf-keras"] == required["tensorflow"]
    assert required["tensorflow-estimator"] == "==2.15.0"


def test_dockerfile_copies_the_files_setup_py_installs_beside_the_packages():
    """The interpreter-start hook's module and .pth file."""
    call = _setup_call()
    files = [f"{name}.py" for name in call["py_modules"]]
    files += [path for _, paths in call["data_files"] for path in paths]
    copied = {name for line in _dockerfile().splitlines() if line.startswith("COPY ")
              for name in line.split()[1:-1]}
    assert files and set(files) <= copied


def test_setup_py_requires_tensorboard_beside_current_tensorflow():
    """TensorFlow 2.15 requires it itself; 2.16+ does not (test_installation.py)."""
    current = _requirements(_setup_call()["install_requires"], "3.12")
    assert current["tensorboard"] == current["tensorflow"]
    assert "tensorboard" not in _requirements(_setup_call()["install_requires"], "3.11")


def test_setup_py_installs_one_tensorflow_per_python():
    pins = _setup_call()["install_requires"]
    legacy, current = _requirements(pins, "3.11"), _requirements(pins, "3.12")
    assert legacy["tensorflow-cpu"] == "==2.15.1" and "tensorflow" not in legacy
    assert "tf-keras" not in legacy and legacy["numpy"].endswith(",<2")
    assert "tensorflow-cpu" not in current and current["tensorflow"] == current["tf-keras"]


def _version(text):
    return tuple(int(part) for part in text.split("."))


def test_dockerfile_python_within_python_requires():
    image = _image_python()
    low, high = re.fullmatch(r">=(\d+\.\d+),<(\d+\.\d+)",
                             _setup_call()["python_requires"]).groups()
    assert _version(low) <= _version(image) < _version(high)


def test_manifests_run_the_image_the_docs_build():
    version = _setup_call()["version"]
    tag = f"estimator-dist:{version}"
    build = f"docker build -t {tag} ."
    assert build in _dockerfile() and build in (_ROOT / "docs/cluster.md").read_text()
    for name in ("tfjob-multi-worker.yaml", "tfjob-parameter-server.yaml"):
        manifest = yaml.safe_load((_ROOT / "docs/cluster" / name).read_text(encoding="utf-8"))
        for spec in manifest["spec"]["tfReplicaSpecs"].values():
            images = {c["image"] for c in spec["template"]["spec"]["containers"]}
            assert images == {tag}, (name, images)
