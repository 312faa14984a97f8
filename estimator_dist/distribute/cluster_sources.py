"""Where a task's cluster comes from: TF_CONFIG, or what a cluster manager injects.

One function, ``resolve_cluster``, reads the first source that is present, in this order
(the first wins; a later one is not read):

| Source | Variables | Written by |
|---|---|---|
| ``TF_CONFIG`` | ``TF_CONFIG`` (JSON) | you, ``estimator_dist.launch``, Kubeflow TFJob, |
| | | Vertex AI, SageMaker with parameter servers |
| ``CLUSTER_SPEC`` | ``CLUSTER_SPEC`` (JSON of worker pools) | Vertex AI custom training |
| ``SM_HOSTS`` | ``SM_HOSTS`` (JSON list), ``SM_CURRENT_HOST`` | SageMaker training |
| ``SLURM`` | ``SLURM_PROCID``, ``SLURM_STEP_NODELIST``, ``SLURM_STEP_TASKS_PER_NODE`` | ``srun`` |

Every source yields a ``cluster.TFConfig``; a fault gives one ``UsageError`` line that
names the source's variable and the fault. A ``master`` task (older Kubeflow
controllers, SageMaker) becomes ``chief``: ``MultiWorkerMirroredStrategy`` accepts only
``chief``, and Estimator treats both alike.

Reading and writing are apart: ``resolve_cluster`` and ``task_from_env`` only read (the
latter once per process for the same variables); ``write_tf_config`` puts a resolved
cluster into ``TF_CONFIG`` when it says otherwise, because TensorFlow's strategies and
Estimator's RunConfig read only ``TF_CONFIG`` (``strategies.build`` calls it, just before
it builds a cluster strategy).
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any, Mapping, MutableMapping

from estimator_dist.distribute import cluster
from estimator_dist.errors import UsageError

SLURM_PORT_BASE = 8888  # SlurmClusterResolver's default: task i of a node listens on +i.
SAGEMAKER_PORT = 2222  # The worker port of SageMaker's own TensorFlow TF_CONFIG.
# Vertex AI's worker pools in order: primary replica, workers, parameter servers, evaluators.
VERTEX_POOLS = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps",
                "workerpool3": "evaluator"}


def _fault(variable: str, rule: str, received: str) -> UsageError:
    return UsageError(f"{variable} {rule}. Received: {received}")


def _json(variable: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise _fault(variable, "must be valid JSON", f"{text[:60]!r} ({error.msg})") from None


def _from_tf_config(environ: Mapping[str, str]) -> cluster.TFConfig:
    return cluster.parse_tf_config(environ["TF_CONFIG"])


def _from_vertex(environ: Mapping[str, str]) -> cluster.TFConfig:
    """Vertex AI: ``{"cluster": {"workerpool0": [...], ...}, "task": {"type": "workerpool0",
    "index": 0}, ...}``."""
    spec = _json("CLUSTER_SPEC", environ["CLUSTER_SPEC"])
    pools = spec.get("cluster") if isinstance(spec, dict) else None
    task = spec.get("task") if isinstance(spec, dict) else None
    if not isinstance(pools, dict) or not isinstance(task, dict):
        raise _fault("CLUSTER_SPEC", "must be a JSON object with 'cluster' and 'task'",
                     f"{environ['CLUSTER_SPEC'][:60]!r}")
    unknown = sorted(set(pools) - set(VERTEX_POOLS))
    if unknown or task.get("type") not in VERTEX_POOLS:
        raise _fault("CLUSTER_SPEC", f"worker pools must be among {', '.join(VERTEX_POOLS)}",
                     f"cluster {sorted(pools)}, task type {task.get('type')!r}")
    translated = {"cluster": {VERTEX_POOLS[p]: a for p, a in pools.items() if a},
                  "task": {"type": VERTEX_POOLS[task["type"]], "index": task.get("index", 0)}}
    return _reparsed("CLUSTER_SPEC", translated)


def _from_sagemaker(environ: Mapping[str, str]) -> cluster.TFConfig:
    """SageMaker: ``SM_HOSTS='["algo-1","algo-2"]'``, ``SM_CURRENT_HOST=algo-1``: one worker
    per host, the first one the chief (as worker 0)."""
    hosts = _json("SM_HOSTS", environ["SM_HOSTS"])
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
        raise _fault("SM_HOSTS", "must be a JSON list of host names", f"{environ['SM_HOSTS']!r}")
    current = environ.get("SM_CURRENT_HOST")
    if current not in hosts:
        raise _fault("SM_CURRENT_HOST", f"must be one of SM_HOSTS {hosts}", f"{current!r}")
    return cluster.TFConfig(cluster={"worker": [f"{h}:{SAGEMAKER_PORT}" for h in hosts]},
                            task_type="worker", task_index=hosts.index(current))


def _slurm_var(environ: Mapping[str, str], name: str) -> tuple[str, str]:
    # Inside `srun` the step variables describe the tasks; a batch script has job ones.
    for key in (f"SLURM_STEP_{name}", f"SLURM_JOB_{name}", f"SLURM_{name}"):
        if environ.get(key):
            return key, environ[key]
    raise _fault(f"SLURM_STEP_{name}", "must be set inside a Slurm job step (run the "
                 "command with srun)", "nothing")


def _from_slurm(environ: Mapping[str, str]) -> cluster.TFConfig:
    """Slurm, laid out as ``tf.distribute.cluster_resolver.SlurmClusterResolver`` does:
    hosts sorted, task i of a node on port ``SLURM_PORT_BASE + i``, every task a worker,
    the task of rank ``SLURM_PROCID``."""
    rank_text = environ["SLURM_PROCID"]
    nodes_key, nodes = _slurm_var(environ, "NODELIST")
    tasks_key, tasks = _slurm_var(environ, "TASKS_PER_NODE")
    from estimator_dist.mends import internals  # Late: loads TensorFlow.

    try:
        hosts = internals.expand_hostlist(nodes)
    except (ValueError, IndexError):
        raise _fault(nodes_key, "must be a Slurm host list, e.g. node[01-04]",
                     repr(nodes)) from None
    try:
        counts = internals.expand_tasks_per_node(tasks)
    except ValueError:
        raise _fault(tasks_key, "must be Slurm tasks per node, e.g. 2(x3),1", repr(tasks)) from None
    if len(counts) != len(hosts):
        raise _fault(tasks_key, f"must give a task count for each of the {len(hosts)} hosts "
                     f"of {nodes_key}", repr(tasks))
    addresses = [f"{host}:{SLURM_PORT_BASE + i}"
                 for host, count in sorted(zip(hosts, counts)) for i in range(count)]
    if not rank_text.isdigit() or int(rank_text) >= len(addresses):
        raise _fault("SLURM_PROCID", f"must be a task rank in [0, {len(addresses)})",
                     repr(rank_text))
    return cluster.TFConfig(cluster={"worker": addresses}, task_type="worker",
                            task_index=int(rank_text))


def _reparsed(source: str, tf_config: dict[str, Any]) -> cluster.TFConfig:
    """Validates a translated cluster with TF_CONFIG's own rules, naming ``source``."""
    try:
        return cluster.parse_tf_config(json.dumps(tf_config))
    except UsageError as error:
        raise UsageError(f"{source} gives a bad cluster: {error}") from None


# (source, the variable whose presence selects it, reader), in precedence order.
SOURCES = (
    ("TF_CONFIG", "TF_CONFIG", _from_tf_config),
    ("CLUSTER_SPEC", "CLUSTER_SPEC", _from_vertex),
    ("SM_HOSTS", "SM_HOSTS", _from_sagemaker),
    ("SLURM", "SLURM_PROCID", _from_slurm),
)


def _chief_not_master(config: cluster.TFConfig) -> cluster.TFConfig:
    if "master" not in config.cluster:
        return config
    spec = {("chief" if t == "master" else t): a for t, a in config.cluster.items()}
    task_type = "chief" if config.task_type == "master" else config.task_type
    return cluster.TFConfig(cluster=spec, task_type=task_type, task_index=config.task_index)


def resolve_cluster(environ: Mapping[str, str] | None = None
                    ) -> tuple[cluster.TFConfig, str | None]:
    """Returns ``(TFConfig, source)`` from the first cluster source present in ``environ``.

    Raises:
      UsageError: no source is present (the message names TF_CONFIG), or the present one
        is malformed (the message names its variable and the fault).
    """
    environ = os.environ if environ is None else environ
    for source, variable, read in SOURCES:
        if environ.get(variable):
            return _chief_not_master(read(environ)), source
    return cluster.parse_tf_config(""), None  # Raises the "TF_CONFIG must be set" error.


def _source_variables(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables ``resolve_cluster`` may read, as a hashable key."""
    return tuple(sorted((key, value) for key, value in environ.items()
                        if key in _VARIABLES or key.startswith("SLURM_")))


_VARIABLES = ("TF_CONFIG", "CLUSTER_SPEC", "SM_HOSTS", "SM_CURRENT_HOST")


@functools.lru_cache(maxsize=4)
def _resolved(variables: tuple[tuple[str, str], ...]) -> tuple[cluster.TFConfig, str | None]:
    return resolve_cluster(dict(variables))


def task_from_env(environ: Mapping[str, str] | None = None, *,
                  strategy: str = "multi_worker") -> cluster.TFConfig:
    """This task's validated cluster (a ``TFConfig``) from the first source present.

    Reads only. With the process environment, the sources are resolved once while their
    variables stay the same, however many modules ask.

    Raises:
      UsageError: as ``resolve_cluster``; with no source present, the message names
        ``strategy``.
    """
    present = os.environ if environ is None else environ
    if not any(present.get(variable) for _, variable, _ in SOURCES):
        raise cluster.missing_tf_config(strategy)
    if environ is not None:
        return resolve_cluster(environ)[0]
    return _resolved(_source_variables(os.environ))[0]


def write_tf_config(config: cluster.TFConfig,
                    environ: MutableMapping[str, str] | None = None) -> None:
    """Makes ``environ["TF_CONFIG"]`` (default: the process's) say the cluster ``config``.

    TensorFlow's strategies and Estimator read ``TF_CONFIG`` only, so a cluster from
    another source (or a ``master`` renamed to ``chief``) is written there before any
    strategy is built; a ``TF_CONFIG`` that says the same cluster is left as it is.
    """
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG")
    if text and _said_by(text) == config:
        return
    environ["TF_CONFIG"] = config.to_json()


def _said_by(text: str) -> cluster.TFConfig | None:
    try:
        return cluster.parse_tf_config(text)
    except UsageError:
        return None
