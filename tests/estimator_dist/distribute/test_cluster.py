"""TF_CONFIG validation and local cluster layout."""
import json

import pytest

from estimator_dist.distribute import cluster, cluster_sources

_CLUSTER = {"worker": ["127.0.0.1:2000", "127.0.0.1:2001"]}


def _tf_config(cluster_spec=None, task_type="worker", index=0):
    return json.dumps({"cluster": _CLUSTER if cluster_spec is None else cluster_spec,
                       "task": {"type": task_type, "index": index}})


def test_parse_tf_config_valid_worker():
    config = cluster.parse_tf_config(_tf_config(index=1))
    assert (config.task_type, config.task_index, config.num_workers) == ("worker", 1, 2)
    assert not config.is_chief


def test_parse_tf_config_worker_zero_is_chief_without_chief_task():
    assert cluster.parse_tf_config(_tf_config(index=0)).is_chief


def test_parse_tf_config_worker_zero_not_chief_with_chief_task():
    spec = {"chief": ["127.0.0.1:1999"], **_CLUSTER}
    assert not cluster.parse_tf_config(_tf_config(spec, "worker", 0)).is_chief
    assert cluster.parse_tf_config(_tf_config(spec, "chief", 0)).is_chief


def test_parse_tf_config_evaluator_outside_cluster_accepted():
    config = cluster.parse_tf_config(_tf_config(task_type="evaluator"))
    assert config.task_type == "evaluator" and not config.is_chief


@pytest.mark.parametrize("text, fault", [
    ("", r"TF_CONFIG must be set"),
    ("{not json", r"TF_CONFIG must be valid JSON"),
    ("[1, 2]", r"TF_CONFIG must be a JSON object"),
    (json.dumps({"task": {"type": "worker", "index": 0}}),
     r"TF_CONFIG must have a non-empty 'cluster'"),
    (_tf_config(task_type="driver"),
     r"TF_CONFIG task type must be one of .*Received: type='driver'"),
    (_tf_config(task_type="ps"), r"TF_CONFIG task type must be one of the cluster's task types"),
    (_tf_config(index=2), r"TF_CONFIG task index must be in \[0, 2\).*Received: index=2"),
    (_tf_config(index=-1), r"TF_CONFIG task index must be in \[0, 2\)"),
    (_tf_config(index="0"), r"TF_CONFIG task index must be an int"),
    (_tf_config({"chief": ["a:1"], "master": ["b:2"]}, "chief"),
     r"TF_CONFIG must not have both 'master' and 'chief'"),
    (_tf_config({"trainer": ["a:1"]}), r"TF_CONFIG cluster task types must be among"),
    (_tf_config({"worker": []}), r"TF_CONFIG cluster entries must be non-empty lists"),
    (_tf_config({"worker": ["no-port"]}), r"TF_CONFIG cluster entries must be .*'host:port'"),
    (_tf_config({"worker": ["a:abc"]}), r"TF_CONFIG cluster ports must be ints in \[1, 65535\]\. "
                                        r"Received: worker 'a:abc'"),
    (_tf_config({"worker": ["a:70000"]}), r"TF_CONFIG cluster ports must be ints in \[1, 65535\]"),
    (json.dumps({"cluster": _CLUSTER}), r"TF_CONFIG must have a 'task' object"),
    (_tf_config({"worker": ["::1:2222"]}),
     r"TF_CONFIG cluster addresses must be 'host:port' with an IPv6 host in brackets "
     r"\('\[::1\]:2222'\)\. Received: worker '::1:2222'"),
    (_tf_config({"evaluator": ["a:1"]}, "evaluator"),
     r"TF_CONFIG cluster must have a chief, master or worker task .*Received: cluster task "
     r"types \['evaluator'\]"),
    (_tf_config({"ps": ["a:1"]}, "ps"), r"TF_CONFIG cluster must have a chief, master or worker"),
    (_tf_config({"chief": ["a:1", "a:2"]}, "chief"),
     r"TF_CONFIG cluster must have one 'chief' task at most .*Received: chief=\['a:1', 'a:2'\]"),
])
def test_parse_tf_config_fault_named(text, fault):
    with pytest.raises(ValueError, match=fault):
        cluster.parse_tf_config(text)


def test_parse_tf_config_bracketed_ipv6_accepted():
    config = cluster.parse_tf_config(_tf_config({"worker": ["[::1]:2222", "[fe80::1]:2223"]}))
    assert config.num_workers == 2


def test_to_json_round_trips():
    config = cluster.parse_tf_config(_tf_config(index=1))
    assert cluster.parse_tf_config(config.to_json()) == config


def test_local_cluster_workers_only():
    spec, tasks = cluster.local_cluster([1, 2], num_workers=2, evaluator=True)
    assert spec == {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    assert tasks == [("worker", 0), ("worker", 1), ("evaluator", 0)]


def test_local_cluster_with_ps_has_chief():
    spec, tasks = cluster.local_cluster([1, 2, 3, 4], num_workers=2, num_ps=2)
    assert spec == {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"],
                    "ps": ["127.0.0.1:3", "127.0.0.1:4"]}
    assert tasks == [("chief", 0), ("worker", 0), ("ps", 0), ("ps", 1)]


@pytest.mark.parametrize("strategy", ["multi_worker", "parameter_server"])
def test_task_from_env_missing_names_strategy(strategy):
    with pytest.raises(ValueError, match=rf"TF_CONFIG must be set for strategy '{strategy}'"):
        cluster_sources.task_from_env({}, strategy=strategy)
