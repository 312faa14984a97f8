"""plan.resolve: what a strategy means for one run, read off one object."""
import json
import os

import pytest

from estimator_dist import plan
from estimator_dist.distribute import cluster_sources, strategy_table
from estimator_dist.errors import UsageError
from estimator_dist.hooks.peer_failure import PeerFailureHook
from estimator_dist.hooks.preemption import PreemptionHook

_CLUSTER = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"],
            "ps": ["127.0.0.1:4"]}


def _hook_types(strategy_plan):
    return [type(hook) for hook in strategy_plan.train_hooks()]


def test_resolve_default_one_replica_chief_without_task(model_dir):
    default = plan.resolve("default", model_dir=model_dir)
    assert (default.replicas, default.is_chief, default.task_type) == (1, True, None)
    assert default.config.train_distribute is None
    assert _hook_types(default) == [PreemptionHook]
    assert default.describe_batch(64) == "global batch 64 over 1 replica"


def test_resolve_mirrored_replicas_split_the_global_batch(model_dir):
    mirrored = plan.resolve("mirrored", num_replicas=2, model_dir=model_dir)
    assert mirrored.replicas == 2
    assert mirrored.describe_batch(64) == "global batch 64 over 2 replicas"
    mirrored.check_batch_size(64)
    with pytest.raises(UsageError, match=r"batch_size must be divisible by the 2 replicas.*"
                                         r"Received: batch_size=63"):
        mirrored.check_batch_size(63)


def test_resolve_tpu_validation_adapts_input_fns(model_dir):
    tpu = plan.resolve("tpu", use_tpu=False, model_dir=model_dir)
    assert tpu.replicas == 1

    def input_fn():
        return "dataset"

    assert tpu.adapt_input(input_fn) is not input_fn
    assert tpu.adapt_input(input_fn)({"use_tpu": False}) == "dataset"


@pytest.mark.parametrize("task_type, index, chief", [
    ("chief", 0, True), ("worker", 0, False), ("evaluator", 0, False)])
def test_task_of_cluster_strategy_reads_the_role(monkeypatch, task_type, index, chief):
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": _CLUSTER, "task": {"type": task_type, "index": index}}))
    task = plan.task_of("parameter_server")
    assert (task.task_type, task.is_chief) == (task_type, chief)


def test_task_of_one_process_strategy_ignores_the_cluster(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": _CLUSTER, "task": {"type": "worker", "index": 1}}))
    assert plan.task_of("mirrored") is None


def test_plan_asynchronous_workers_each_step_a_whole_batch(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": _CLUSTER, "task": {"type": "worker", "index": 1}}))
    kind = strategy_table.kind_of("parameter_server")
    task = plan.task_of("parameter_server")
    ps_plan = plan.Plan(kind=kind, config=None, replicas=plan._replicas(kind, None, task),
                        task=task)
    assert ps_plan.replicas == 1
    assert ps_plan.describe_batch(128) == "batch 128 per worker step, asynchronous"
    assert _hook_types(ps_plan) == [PreemptionHook]


def test_plan_collectives_add_the_peer_failure_hook(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
         "task": {"type": "worker", "index": 0}}))
    kind = strategy_table.kind_of("multi_worker")
    task = plan.task_of("multi_worker")
    mw_plan = plan.Plan(kind=kind, config=None, replicas=plan._replicas(kind, None, task),
                        task=task)
    assert (mw_plan.replicas, mw_plan.is_chief) == (2, True)
    assert _hook_types(mw_plan) == [PreemptionHook, PeerFailureHook]


def test_resolve_parses_the_cluster_once_for_the_strategy_too(monkeypatch, model_dir):
    spec = {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"], "evaluator": ["127.0.0.1:3"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": spec,
                                                "task": {"type": "evaluator", "index": 0}}))
    calls = []
    parse = cluster_sources.task_from_env

    def counted(*args, **kwargs):
        calls.append(args)
        return parse(*args, **kwargs)

    monkeypatch.setattr(cluster_sources, "task_from_env", counted)
    ps_plan = plan.resolve("parameter_server", model_dir=model_dir)
    assert (ps_plan.task_type, ps_plan.config.task_type) == ("evaluator", "evaluator")
    assert len(calls) == 1


def test_task_of_reads_another_source_without_writing_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setenv("SM_HOSTS", '["algo-1", "algo-2"]')
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-2")
    assert plan.task_of("multi_worker").task_index == 1
    assert "TF_CONFIG" not in os.environ
