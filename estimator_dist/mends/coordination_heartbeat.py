"""A coordination-service heartbeat as long as the stall watchdog's bound (mend
``coordination_heartbeat``).

In TF2 behaviour ``MultiWorkerMirroredStrategy`` starts TensorFlow's coordination service
with its default heartbeat timeout, 10 s (``collective_all_reduce_strategy.py``, read): a
chief or worker whose heartbeat comes 10 s late (a process paused, or starved on a loaded
machine) is set to ERROR, and every task's collectives are aborted ("heartbeat timeout").
Estimator's monitored session then re-creates its session, which multi-worker training
cannot survive, so a healthy cluster ends. This mend configures the coordination service
as the strategy would, before the strategy's first build, with a heartbeat timeout of
twice ``collective_timeout``: each task's agent sends its heartbeat every half of the
timeout, and waits as long for the leader's answer (``coordination_service_agent.cc``,
read), so a task paused just before its next heartbeat is due is seen silent for the
pause plus half the timeout, and a paused leader fails its peers' heartbeat calls after
half the timeout. With twice ``collective_timeout`` a pause shorter than
``collective_timeout`` is survived, whichever task it stops and whenever it starts; one
that lasts longer is ended by the stall watchdog within its bound (mend
``collective_watchdog``), and a dead peer at once, by its refused connections. Graph mode
(TF1 behaviour) starts no coordination service; a process whose service is already
configured (an earlier strategy, the user's own) is left as it is.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import tensorflow as tf
from tensorflow.python.distribute import collective_all_reduce_strategy
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.eager import context

_COORDINATED_JOBS = ("chief", "worker")


# The heartbeat timeout per second of pause that must be survived: TensorFlow's agent
# heartbeats every half of the timeout (see the module's docstring).
HEARTBEAT_TIMEOUT_PER_PAUSE = 2


def install(cluster: Mapping[str, Sequence[str]], task_type: str, seconds: float) -> None:
    """Configures the coordination service of a ``task_type`` task of ``cluster`` (task
    type -> addresses) so that a task paused for less than ``seconds`` is not taken for
    lost, where the next ``MultiWorkerMirroredStrategy`` would start it with TensorFlow's
    10 s heartbeat timeout."""
    eager = context.context()
    if (not tf.compat.v1.executing_eagerly_outside_functions() or task_type not in _COORDINATED_JOBS
            or eager.coordination_service is not None):
        return
    spec = tf.train.ClusterSpec({job: list(cluster[job]) for job in _COORDINATED_JOBS
                                 if cluster.get(job)})
    jobs = [collective_all_reduce_strategy.coordination_config_pb2.CoordinatedJob(
        name=job, num_tasks=spec.num_tasks(job)) for job in spec.jobs]
    eager.configure_coordination_service(
        service_type="standalone", service_leader=multi_worker_util.coordination_leader(spec),
        coordinated_jobs=jobs,
        heartbeat_timeout_in_ms=int(HEARTBEAT_TIMEOUT_PER_PAUSE * seconds * 1000))
