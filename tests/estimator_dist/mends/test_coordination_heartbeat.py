"""Mend coordination_heartbeat: the coordination service's heartbeat timeout outlasts a
pause shorter than ``collective_timeout``, whenever it starts (the cluster test is
``test_watchdog.py::test_paused_peer_within_collective_timeout_trains_on``)."""
import types

import pytest
import tensorflow as tf

from estimator_dist.mends import coordination_heartbeat


class _Context:
    """The eager context's coordination-service part, recording its configuration."""

    def __init__(self, configured=None):
        self.coordination_service = configured
        self.configured = []

    def configure_coordination_service(self, **config):
        self.configured.append(config)


@pytest.fixture
def eager_context(monkeypatch):
    def use(configured=None):
        fake = _Context(configured)
        monkeypatch.setattr(coordination_heartbeat, "context",
                            types.SimpleNamespace(context=lambda: fake))
        return fake
    return use


@pytest.mark.skipif(not tf.compat.v1.executing_eagerly_outside_functions(),
                    reason="TF1 behaviour starts no coordination service")
def test_heartbeat_timeout_outlasts_a_pause_shorter_than_seconds(eager_context):
    """TensorFlow's agent heartbeats every half of the timeout (and waits as long for the
    leader): a task paused for ``seconds`` just before its heartbeat is due is silent for
    ``seconds`` plus half the timeout, which must stay within the timeout."""
    fake = eager_context()
    coordination_heartbeat.install({"worker": ["h:1", "h:2"], "ps": ["h:3"]}, "worker", 20)
    [config] = fake.configured
    timeout = config["heartbeat_timeout_in_ms"] / 1000
    assert 20 + timeout / 2 <= timeout, timeout
    assert config["service_leader"] == "/job:worker/replica:0/task:0"
    assert [(job.name, job.num_tasks) for job in config["coordinated_jobs"]] == [("worker", 2)]


@pytest.mark.parametrize("task_type,configured", [("ps", None), ("worker", "standalone")],
                         ids=["ps_task", "already_configured"])
def test_leaves_ps_tasks_and_a_configured_service_alone(eager_context, task_type, configured):
    fake = eager_context(configured)
    coordination_heartbeat.install({"worker": ["h:1"], "ps": ["h:3"]}, task_type, 20)
    assert fake.configured == []
