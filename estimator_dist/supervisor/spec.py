"""A launch as the supervisor runs it: the launch command's flags, checked, in one frozen
value (``LaunchSpec``). ``commands/launch.py`` builds it; nothing changes it afterwards.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class MultiHost:
    """This node's share of a multi-host cluster (``--nodes``, ``--node-rank``, ``--hosts``,
    ``--base-port``): node ``node_rank`` of ``nodes``, whose host names are ``hosts`` in
    rank order; node I's tasks listen on ``base_port + I * (workers + ps)`` onwards."""

    nodes: int
    node_rank: int
    hosts: tuple[str, ...]
    base_port: int


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """One launch: ``command`` run once per task of a cluster of ``workers`` (worker 0 the
    chief), ``ps`` parameter servers and an ``evaluator`` if asked, per node with
    ``multi_host`` (None: a local cluster on 127.0.0.1)."""

    command: tuple[str, ...]
    workers: int
    ps: int = 0
    evaluator: bool = False
    timeout: int = 0  # Seconds until every task is stopped and the launch fails; 0: none.
    max_restarts: int = 0
    allow_network_exposure: bool = False
    multi_host: MultiHost | None = None
