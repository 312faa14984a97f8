"""The Dockerfile installs what setup.py pins, and is the image the docs build and the
manifests run (docker cannot pull base images here, so nothing is built)."""
import ast
import pathlib
import re

import yaml

from tests.conftest import REPO_ROOT

_ROOT = pathlib.Path(REPO_ROOT)
_PIN = re.compile(r'"(?P<name>[\w.\[\]-]+)(?P<spec>[=<>]=?[\w.*]+)"')


def _setup_call():
    """setup.py's module-level assignments and the keywords of its ``setup(...)`` call,
    as Python values."""
    tree = ast.parse((_ROOT / "setup.py").read_text(encoding="utf-8"))
    names = {node.targets[0].id: node.value for node in tree.body
             if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    call = next(node.value for node in tree.body if isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call) and node.value.func.id == "setup")

    def value(node):
        return ast.literal_eval(names[node.id]) if isinstance(node, ast.Name) else (
            [value(element) for element in node.elts] if isinstance(node, ast.List)
            else ast.literal_eval(node))

    return {keyword.arg: value(keyword.value) for keyword in call.keywords
            if keyword.arg in ("version", "install_requires", "python_requires")}


def _requirements(pins):
    """"tensorflow-cpu==2.15.1" -> {"tensorflow-cpu": "==2.15.1"}."""
    return dict(re.fullmatch(r"([\w.\[\]-]+)(.*)", pin).groups() for pin in pins)


def _dockerfile():
    return (_ROOT / "Dockerfile").read_text(encoding="utf-8")


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
    required = _requirements(_setup_call()["install_requires"])
    gpu = _gpu_pins()
    assert gpu["tensorflow[and-cuda]"] == required["tensorflow-cpu"] == "==2.15.1"
    estimator = required["tensorflow-estimator"]  # "==2.15.*"
    assert gpu["tensorflow-estimator"].startswith(estimator.rstrip("*"))
    assert gpu["numpy"] == "<2" and required["numpy"].endswith(",<2")
    named = set(re.findall(r"\b(tqdm|PyYAML)\b", _dockerfile()))
    assert named == {name for name in required if name in ("tqdm", "PyYAML")}


def _version(text):
    return tuple(int(part) for part in text.split("."))


def test_dockerfile_python_within_python_requires():
    image = re.search(r"^FROM python:(\d+\.\d+)-", _dockerfile(), re.MULTILINE)[1]
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
