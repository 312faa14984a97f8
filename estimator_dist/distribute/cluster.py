"""TF_CONFIG: parse and validate it, and write it for local clusters.

TensorFlow reads ``TF_CONFIG`` itself; this module checks it first so that a mistake
gives one sentence naming the fault instead of a hang or a deep stack trace.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterable, Sequence

from estimator_dist.errors import UsageError

TASK_TYPES = ("chief", "master", "worker", "ps", "evaluator")
TRAINING_TASK_TYPES = ("chief", "master", "worker")
# A cluster: task type -> its tasks' "host:port" addresses; a task: (task type, index).
Cluster = dict[str, list[str]]
Task = tuple[str, int]


@dataclasses.dataclass(frozen=True)
class TFConfig:
    """A validated ``TF_CONFIG``.

    Attributes:
      cluster: task type -> list of "host:port" addresses.
      task_type: this process's task type.
      task_index: this process's index within its task type.
    """

    cluster: Cluster
    task_type: str
    task_index: int

    @property
    def num_workers(self) -> int:
        """Training workers, the chief included."""
        return sum(len(self.cluster.get(t, ())) for t in TRAINING_TASK_TYPES)

    @property
    def is_chief(self) -> bool:
        """The chief task; worker 0 when the cluster names no chief or master."""
        if self.task_type in ("chief", "master"):
            return True
        has_chief = "chief" in self.cluster or "master" in self.cluster
        return self.task_type == "worker" and self.task_index == 0 and not has_chief

    def to_json(self) -> str:
        return json.dumps({"cluster": self.cluster,
                           "task": {"type": self.task_type, "index": self.task_index}})


def _fault(rule: str, received: str) -> UsageError:
    return UsageError(f"TF_CONFIG {rule}. Received: {received}")


def _parse_cluster(config: dict[str, Any]) -> Cluster:
    spec = config.get("cluster")
    if not isinstance(spec, dict) or not spec:
        raise _fault("must have a non-empty 'cluster' object", f"cluster={spec!r}")
    for task_type, addresses in spec.items():
        if task_type not in TASK_TYPES:
            raise _fault(f"cluster task types must be among {', '.join(TASK_TYPES)}",
                         f"{task_type!r}")
        if (not isinstance(addresses, list) or not addresses
                or not all(isinstance(a, str) and ":" in a for a in addresses)):
            raise _fault("cluster entries must be non-empty lists of 'host:port' strings",
                         f"{task_type}={addresses!r}")
        for address in addresses:
            _check_port(task_type, address)
    if "master" in spec and "chief" in spec:
        raise _fault("must not have both 'master' and 'chief' in the cluster",
                     f"cluster task types {sorted(spec)}")
    for task_type in ("chief", "master"):
        if len(spec.get(task_type, ())) > 1:
            raise _fault(f"cluster must have one {task_type!r} task at most (it alone writes "
                         "the checkpoints)", f"{task_type}={spec[task_type]!r}")
    if not any(task_type in spec for task_type in TRAINING_TASK_TYPES):
        raise _fault("cluster must have a chief, master or worker task (an evaluator or "
                     "parameter servers alone train nothing)",
                     f"cluster task types {sorted(spec)}")
    return spec


def _check_port(task_type: str, address: str) -> None:
    host, port = address.rsplit(":", 1)
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise _fault("cluster addresses must be 'host:port' with an IPv6 host in brackets "
                     "('[::1]:2222')", f"{task_type} {address!r}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise _fault("cluster ports must be ints in [1, 65535]", f"{task_type} {address!r}")


def _parse_task(config: dict[str, Any], spec: Cluster) -> tuple[str, int]:
    task = config.get("task")
    if not isinstance(task, dict):
        raise _fault("must have a 'task' object with 'type' and 'index'", f"task={task!r}")
    task_type, index = task.get("type"), task.get("index", 0)
    if task_type not in TASK_TYPES:
        raise _fault(f"task type must be one of {', '.join(TASK_TYPES)}", f"type={task_type!r}")
    if isinstance(index, bool) or not isinstance(index, int):
        raise _fault("task index must be an int", f"index={index!r}")
    if task_type == "evaluator":
        # Most launchers leave the evaluator out of the cluster; TensorFlow accepts both.
        size = len(spec.get("evaluator", ())) or 1
    elif task_type not in spec:
        raise _fault(f"task type must be one of the cluster's task types {sorted(spec)}",
                     f"type={task_type!r}")
    else:
        size = len(spec[task_type])
    if not 0 <= index < size:
        raise _fault(f"task index must be in [0, {size}) for task type {task_type!r}",
                     f"index={index}")
    return task_type, index


def parse_tf_config(text: str | None) -> TFConfig:
    """Parses and validates a ``TF_CONFIG`` string into a ``TFConfig``.

    Raises:
      UsageError: naming ``TF_CONFIG`` and the fault.
    """
    if not text:
        raise missing_tf_config("multi_worker")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise _fault("must be valid JSON", f"{text[:60]!r} ({error.msg})") from None
    if not isinstance(config, dict):
        raise _fault("must be a JSON object", f"{type(config).__name__}")
    spec = _parse_cluster(config)
    task_type, index = _parse_task(config, spec)
    return TFConfig(cluster=spec, task_type=task_type, task_index=index)


def missing_tf_config(strategy: str) -> UsageError:
    """The error for a cluster ``strategy`` run where no cluster source is set."""
    return UsageError(
        f"TF_CONFIG must be set for strategy {strategy!r} (a JSON cluster and task, or start "
        f"the tasks with `python -m estimator_dist.launch`). Received: nothing")


def local_cluster(ports: Iterable[int], num_workers: int, num_ps: int = 0,
                  evaluator: bool = False) -> tuple[Cluster, list[Task]]:
    """Builds a 127.0.0.1 cluster: workers (worker 0 is chief), ps tasks and an evaluator.

    Returns:
      (cluster, tasks): the cluster dict and the ordered list of (task_type, index).
    """
    ports = iter(ports)
    workers = [f"127.0.0.1:{next(ports)}" for _ in range(num_workers)]
    spec, tasks, _ = cluster_layout(workers, [f"127.0.0.1:{next(ports)}" for _ in range(num_ps)],
                                    evaluator)
    return spec, tasks


def cluster_layout(workers: Sequence[str], ps: Sequence[str],
                   evaluator: bool = False) -> tuple[Cluster, list[Task], list[str | None]]:
    """Lays out training workers (the first is the chief) and parameter servers.

    Args:
      workers: the workers' "host:port" addresses, the chief's first.
      ps: the parameter servers' addresses (may be empty).
      evaluator: whether an evaluator task runs (outside the cluster, as most launchers
        and TensorFlow allow).

    Returns:
      (cluster, tasks, addresses): the cluster dict, the ordered list of
      (task_type, index), and each task's address (None for the evaluator).
    """
    spec = {"worker": list(workers)}
    tasks = [("worker", i) for i in range(len(workers))]
    if ps:
        # Parameter-server training needs an explicit chief; worker 0 becomes it.
        spec["chief"] = [spec["worker"].pop(0)]
        tasks = [("chief", 0)] + [("worker", i) for i in range(len(workers) - 1)]
        if not spec["worker"]:
            del spec["worker"]
        spec["ps"] = list(ps)
        tasks += [("ps", i) for i in range(len(ps))]
    addresses: list[str | None] = [spec[task_type][index] for task_type, index in tasks]
    if evaluator:
        tasks.append(("evaluator", 0))
        addresses.append(None)
    return spec, tasks, addresses


def multi_host_cluster(hosts: Sequence[str], base_port: int, workers_per_node: int,
                       ps_per_node: int = 0,
                       evaluator: bool = False) -> tuple[Cluster, list[Task], list[int]]:
    """Lays out a cluster over ``hosts``, one node each, with a deterministic port scheme.

    Node ``r`` runs ``workers_per_node`` workers on ports ``base_port + r * P + j`` (P =
    tasks per node) and then ``ps_per_node`` parameter servers on the next ports, so the
    same host may appear more than once. The first worker of node 0 is the chief; the
    evaluator, if any, runs on node 0.

    Returns:
      (cluster, tasks, nodes): the cluster dict, the ordered list of (task_type, index)
      and the node rank of each task.
    """
    per_node = workers_per_node + ps_per_node
    node_of: dict[str | None, int] = {}
    workers: list[str]
    ps: list[str]
    workers, ps = [], []
    for rank, host in enumerate(hosts):
        for slot in range(per_node):
            address = f"{host}:{base_port + rank * per_node + slot}"
            node_of[address] = rank
            (workers if slot < workers_per_node else ps).append(address)
    spec, tasks, addresses = cluster_layout(workers, ps, evaluator)
    return spec, tasks, [node_of.get(address, 0) for address in addresses]
