"""``python -m estimator_dist.doctor``: the facts a bug report needs, in one place.

    python -m estimator_dist.doctor [--json]

Prints the versions (Python, TensorFlow, tensorflow-estimator, tf-keras, numpy,
estimator-dist), the TensorFlow release and the mends that give it ``tf.estimator`` back
(2.16 and later), the interpreter-start hook, what TensorFlow 2.15 installed beside itself
(TensorBoard, Keras 2), two TensorFlow distributions over one folder, the devices (CPUs,
GPUs, and the replicas a "mirrored" run would make),
the CPU features that decide mixed precision here (avx512_bf16, amx_bf16), the cluster
source this process would use and the ``TF_CONFIG`` it resolves to (or the fault, in one
line), every mend and whether it is active, and whether ``python -m estimator_dist.launch``
can isolate a local cluster in a private network namespace. Changes nothing; exits 0
whatever it finds.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from estimator_dist.commands import cli, logs

if TYPE_CHECKING:
    import argparse

_CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
_ISOLATION_SECONDS = 30


def doctor_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of the doctor command (standalone, or added to ``subparsers``)."""
    parser = cli.command_parser(
        "doctor", "Print versions, devices, CPU features, the cluster this process would "
        "join, the active mends and whether local clusters can be isolated: paste it into "
        "a bug report.", subparsers)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    return parser


def versions() -> dict[str, str]:
    """Python, the platform and the installed distributions, as a run records them."""
    from estimator_dist import run_record

    return {"platform": platform.platform(), **run_record.versions()}


def devices() -> dict[str, Any]:
    """The physical CPUs and GPUs, and the devices a "mirrored" run would replicate over."""
    import tensorflow as tf  # Late: loads TensorFlow.

    from estimator_dist.distribute import strategies  # Late: loads TensorFlow.

    gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
    mirrored = ([f"/gpu:{i}" for i in range(len(gpus))] if gpus else
                [f"/cpu:{i}" for i in range(strategies.DEFAULT_CPU_REPLICAS)])
    return {"cpus": os.cpu_count(), "physical": [d.name for d in tf.config.list_physical_devices()],
            "gpus": gpus, "mirrored_replicas": mirrored,
            "mirrored_reduction": "NCCL/all-reduce" if gpus else "ReductionToOneDevice"}


def cpu_features(cpuinfo: str = "/proc/cpuinfo") -> dict[str, Any]:
    """The CPU model and which of ``_CPU_FLAGS`` it has (None each where unreadable)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        return {"model": None, **{flag: None for flag in _CPU_FLAGS}}
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    flags = set(fields.get("flags", "").split())
    return {"model": fields.get("model name"), **{flag: flag in flags for flag in _CPU_FLAGS}}


def cluster_state(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The cluster source this process would use and the TF_CONFIG it resolves to."""
    from estimator_dist.distribute import cluster_sources
    from estimator_dist.errors import UsageError

    environ = os.environ if environ is None else environ
    present = [variable for _, variable, _ in cluster_sources.SOURCES if environ.get(variable)]
    if not present:
        return {"source": None, "tf_config": None, "fault": None}
    try:
        config, source = cluster_sources.resolve_cluster(environ)
    except UsageError as error:
        return {"source": present[0], "tf_config": None, "fault": str(error)}
    return {"source": source, "tf_config": json.loads(config.to_json()), "fault": None}


def mend_states() -> dict[str, dict[str, Any]]:
    """Every mend: its scope, the strategies whose facts need it and whether it is active
    here."""
    from estimator_dist import mends
    from estimator_dist.distribute import strategy_table
    from estimator_dist.errors import UsageError

    try:
        off, off_fault = mends.turned_off(), None
    except UsageError as error:
        off, off_fault = frozenset(), str(error)
    release = mends.tensorflow_release()
    states: dict[str, dict[str, Any]] = {}
    for name, mend in mends.MENDS.items():
        fault = off_fault or mends.version_fault(mend)
        state = ("refused: " + fault if fault else f"off ({mends.OFF_VARIABLE})" if name in off
                 else "active" if mends.applies(mend)
                 else f"not needed on TensorFlow {release}: {mend.elsewhere}")
        states[name] = {"state": state, "scope": mend.scope,
                        "strategies": list(strategy_table.names_where(mend.needed_by)),
                        "installed_here": name in mends.installed()}
    return states


def isolation() -> dict[str, Any]:
    """Whether the launcher can put a local cluster in a private network namespace (tried
    in a child process, which ends with it)."""
    probe = ("from estimator_dist.supervisor.isolation import isolate_network\n"
             "from estimator_dist.errors import UsageError\n"
             "try:\n    isolate_network()\nexcept UsageError as error:\n"
             "    print(error)\n    raise SystemExit(1)\n")
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              timeout=_ISOLATION_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        return {"available": False, "reason": f"the probe took over {_ISOLATION_SECONDS} s"}
    reason = (done.stdout.strip() or done.stderr.strip()[-300:]) or None
    return {"available": done.returncode == 0, "reason": None if done.returncode == 0 else reason}


def tensorflow_state() -> dict[str, Any]:
    """The TensorFlow release in use, the mends that give it ``tf.estimator`` back, the
    interpreter-start hook, what TensorFlow 2.15 installed beside itself, and a
    ``tensorflow/`` folder two distributions installed."""
    from estimator_dist import installation, mends

    restoring = [name for name, mend in mends.MENDS.items()
                 if mend.scope == "import" and name in mends.installed()]
    return {"release": mends.tensorflow_release(), "estimator_restored_by": restoring,
            "startup_hook": installation.startup_hook_state(),
            "companions": installation.companions(),
            "distributions_fault": installation.tensorflow_distributions_fault()}


def report() -> dict[str, Any]:
    """Everything ``doctor`` prints, as one dict."""
    devices_found = devices()  # Imports TensorFlow, which installs the "import" mends.
    return {"versions": versions(), "tensorflow": tensorflow_state(), "devices": devices_found,
            "cpu": cpu_features(), "cluster": cluster_state(), "mends": mend_states(),
            "isolation": isolation()}


def _yes(value: bool | None) -> str:
    return "unknown" if value is None else ("yes" if value else "no")


def _cluster_lines(cluster: Mapping[str, Any]) -> list[str]:
    if cluster["fault"]:
        return [f"source       {cluster['source']}", f"fault        {cluster['fault']}"]
    if cluster["source"] is None:
        return ["source       none (no TF_CONFIG, CLUSTER_SPEC, SM_HOSTS or SLURM_PROCID): "
                "one-process strategies only"]
    return [f"source       {cluster['source']}",
            f"TF_CONFIG    {json.dumps(cluster['tf_config'], sort_keys=True)}"]


def format_report(facts: Mapping[str, Any]) -> str:
    """The report as the text a user pastes into a bug report."""
    lines = ["## versions"] + [f"{name:<21}{version or 'not installed'}"
                                for name, version in facts["versions"].items()]
    tf_state = facts["tensorflow"]
    lines += ["", "## tensorflow", f"release      {tf_state['release']}",
              "tf.estimator " + ("restored (tensorflow-estimator 2.15.0) by mends "
                                 + ", ".join(tf_state["estimator_restored_by"])
                                 if tf_state["estimator_restored_by"]
                                 else "TensorFlow's own"),
              f"startup hook {tf_state['startup_hook']}"]
    lines += [f"{name:<13}{state}" for name, state in tf_state["companions"].items()]
    if tf_state["distributions_fault"]:
        lines.append(f"fault        {tf_state['distributions_fault']}")
    dev, cpu = facts["devices"], facts["cpu"]
    lines += ["", "## devices", f"cpus         {dev['cpus']} ({cpu['model'] or 'model unknown'})",
              f"physical     {', '.join(dev['physical'])}",
              f"gpus         {', '.join(dev['gpus']) or 'none'}",
              f"mirrored     {', '.join(dev['mirrored_replicas'])} "
              f"({dev['mirrored_reduction']})"]
    lines += ["", "## cpu features (bfloat16 mixed precision wants avx512_bf16 or amx_bf16)"]
    lines += [f"{flag:<13}{_yes(cpu[flag])}" for flag in _CPU_FLAGS]
    lines += ["", "## cluster"] + _cluster_lines(facts["cluster"])
    lines += ["", "## mends (scope: strategies: state)"]
    width = max(map(len, facts["mends"])) + 1
    lines += [f"{name:<{width}}{m['scope']}: {', '.join(m['strategies']) or 'when asked for'}: "
              f"{m['state']}"
              for name, m in facts["mends"].items()]
    iso = facts["isolation"]
    lines += ["", "## launcher isolation",
              "private network namespace: " + ("available" if iso["available"] else
                                               f"not available ({iso['reason']})")]
    return "\n".join(lines)


def doctor_command(args: argparse.Namespace) -> int:
    facts = report()
    print(json.dumps(facts, indent=2, sort_keys=True) if args.json else format_report(facts))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logs.quiet_tensorflow(verbose=False)
    return cli.run(doctor_parser(), doctor_command, argv)
