"""Cluster sources: TF_CONFIG, Kubeflow TFJob, Slurm, Vertex AI and SageMaker variables."""
import json
import os
import re

import pytest
import tensorflow as tf
import yaml
from tensorflow.python.distribute import multi_worker_util

import estimator_dist
from estimator_dist.distribute import cluster, cluster_sources
from tests.support import REPO_ROOT


def _tfjob_tf_config(cluster_spec, task_type, index):
    # What the Kubeflow training operator writes: lower-case types, service addresses.
    return json.dumps({"cluster": cluster_spec, "task": {"type": task_type, "index": index},
                       "environment": "cloud"})


def _svc(job, task_type, count, namespace="team"):
    return [f"{job}-{task_type}-{i}.{namespace}.svc:2222" for i in range(count)]


def test_resolve_cluster_tf_config_as_given():
    text = json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker",
                                                                      "index": 1}})
    config, source = cluster_sources.resolve_cluster({"TF_CONFIG": text})
    assert source == "TF_CONFIG"
    assert config == cluster.TFConfig({"worker": ["a:1", "b:2"]}, "worker", 1)


def test_resolve_cluster_tfjob_chief_with_evaluator_inside():
    spec = {"chief": _svc("mnist", "chief", 1), "worker": _svc("mnist", "worker", 2),
            "evaluator": _svc("mnist", "evaluator", 1)}
    config, _ = cluster_sources.resolve_cluster(
        {"TF_CONFIG": _tfjob_tf_config(spec, "evaluator", 0)})
    assert config.task_type == "evaluator" and config.num_workers == 3
    assert config.cluster["worker"][1] == "mnist-worker-1.team.svc:2222"


def test_resolve_cluster_tfjob_master_becomes_chief():
    spec = {"master": _svc("mnist", "master", 1), "worker": _svc("mnist", "worker", 1)}
    config, _ = cluster_sources.resolve_cluster({"TF_CONFIG": _tfjob_tf_config(spec, "master", 0)})
    assert config.cluster == {"chief": ["mnist-master-0.team.svc:2222"],
                              "worker": ["mnist-worker-0.team.svc:2222"]}
    assert (config.task_type, config.is_chief) == ("chief", True)


def test_resolve_cluster_tfjob_evaluator_outside_cluster():
    spec = {"chief": _svc("mnist", "chief", 1), "worker": _svc("mnist", "worker", 1)}
    config, _ = cluster_sources.resolve_cluster(
        {"TF_CONFIG": _tfjob_tf_config(spec, "evaluator", 0)})
    assert config.task_type == "evaluator" and "evaluator" not in config.cluster


def test_resolve_cluster_vertex_pools_map_to_task_types():
    spec = {"cluster": {"workerpool0": ["cmle-training-workerpool0-ab-0:2222"],
                        "workerpool1": ["cmle-training-workerpool1-ab-0:2222",
                                        "cmle-training-workerpool1-ab-1:2222"]},
            "environment": "cloud", "task": {"type": "workerpool1", "index": 1}}
    config, source = cluster_sources.resolve_cluster({"CLUSTER_SPEC": json.dumps(spec)})
    assert source == "CLUSTER_SPEC"
    assert config.cluster == {"chief": ["cmle-training-workerpool0-ab-0:2222"],
                              "worker": ["cmle-training-workerpool1-ab-0:2222",
                                         "cmle-training-workerpool1-ab-1:2222"]}
    assert (config.task_type, config.task_index) == ("worker", 1)


def test_resolve_cluster_sagemaker_hosts_are_workers():
    environ = {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2"}
    config, source = cluster_sources.resolve_cluster(environ)
    assert source == "SM_HOSTS"
    assert config == cluster.TFConfig({"worker": ["algo-1:2222", "algo-2:2222"]}, "worker", 1)


def test_resolve_cluster_slurm_follows_slurm_cluster_resolver_layout():
    environ = {"SLURM_PROCID": "2", "SLURM_STEP_NODELIST": "node[02,01]",
               "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_STEP_NUM_TASKS": "4"}
    config, source = cluster_sources.resolve_cluster(environ)
    assert source == "SLURM"
    assert config.cluster == {"worker": ["node01:8888", "node01:8889", "node02:8888",
                                         "node02:8889"]}
    assert (config.task_type, config.task_index) == ("worker", 2)


def test_resolve_cluster_slurm_batch_script_job_variables():
    environ = {"SLURM_PROCID": "0", "SLURM_JOB_NODELIST": "gpu-a1", "SLURM_TASKS_PER_NODE": "1"}
    config, _ = cluster_sources.resolve_cluster(environ)
    assert config.cluster == {"worker": ["gpu-a1:8888"]}


def test_resolve_cluster_tf_config_wins_over_others():
    text = json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})
    environ = {"TF_CONFIG": text, "SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1",
               "SLURM_PROCID": "0"}
    assert cluster_sources.resolve_cluster(environ)[1] == "TF_CONFIG"


@pytest.mark.parametrize("environ, fault", [
    ({}, r"TF_CONFIG must be set for strategy 'multi_worker'"),
    ({"TF_CONFIG": "{bad"}, r"TF_CONFIG must be valid JSON"),
    ({"CLUSTER_SPEC": "[]"}, r"CLUSTER_SPEC must be a JSON object with 'cluster' and 'task'"),
    ({"CLUSTER_SPEC": json.dumps({"cluster": {"pool9": ["a:1"]},
                                  "task": {"type": "pool9", "index": 0}})},
     r"CLUSTER_SPEC worker pools must be among workerpool0"),
    ({"CLUSTER_SPEC": json.dumps({"cluster": {"workerpool0": ["a:1"]},
                                  "task": {"type": "workerpool0", "index": 3}})},
     r"CLUSTER_SPEC gives a bad cluster: TF_CONFIG task index must be in \[0, 1\)"),
    ({"SM_HOSTS": "algo-1"}, r"SM_HOSTS must be valid JSON"),
    ({"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-9"},
     r"SM_CURRENT_HOST must be one of SM_HOSTS \['algo-1'\]. Received: 'algo-9'"),
    ({"SLURM_PROCID": "0"}, r"SLURM_STEP_NODELIST must be set inside a Slurm job step"),
    ({"SLURM_PROCID": "5", "SLURM_STEP_NODELIST": "n1", "SLURM_STEP_TASKS_PER_NODE": "2"},
     r"SLURM_PROCID must be a task rank in \[0, 2\). Received: '5'"),
    ({"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_TASKS_PER_NODE": "1"},
     r"SLURM_STEP_TASKS_PER_NODE must give a task count for each of the 2 hosts"),
])
def test_resolve_cluster_fault_names_source(environ, fault):
    with pytest.raises(ValueError, match=fault):
        cluster_sources.resolve_cluster(environ)


def test_task_from_env_reads_the_variable_without_writing():
    environ = {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2"}
    assert cluster_sources.task_from_env(environ).task_index == 1
    assert "TF_CONFIG" not in environ


def test_task_from_env_resolves_once_per_process(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "a:2"]},
                                                "task": {"type": "worker", "index": 1}}))
    calls = []
    resolve = cluster_sources.resolve_cluster
    monkeypatch.setattr(cluster_sources, "resolve_cluster",
                        lambda environ: calls.append(1) or resolve(environ))
    cluster_sources._resolved.cache_clear()
    tasks = [cluster_sources.task_from_env() for _ in range(3)]
    assert tasks[0].task_index == 1 and len(calls) == 1


def test_write_tf_config_writes_tf_config_for_other_sources():
    environ = {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-1"}
    config = cluster_sources.task_from_env(environ)
    cluster_sources.write_tf_config(config, environ)
    assert cluster.parse_tf_config(environ["TF_CONFIG"]) == config


def test_write_tf_config_keeps_tf_config_as_given():
    text = json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0},
                       "environment": "cloud"})
    environ = {"TF_CONFIG": text}
    cluster_sources.write_tf_config(cluster_sources.task_from_env(environ), environ)
    assert environ["TF_CONFIG"] == text


def test_write_tf_config_renames_master_to_chief():
    spec = {"master": ["a:1"], "worker": ["a:2"]}
    environ = {"TF_CONFIG": json.dumps({"cluster": spec, "task": {"type": "master"}})}
    cluster_sources.write_tf_config(cluster_sources.task_from_env(environ), environ)
    assert cluster.parse_tf_config(environ["TF_CONFIG"]).task_type == "chief"


def test_make_run_config_multi_worker_bad_source_names_it(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "")  # Empty counts as unset; put back afterwards.
    monkeypatch.setenv("SM_HOSTS", '["algo-1"]')
    monkeypatch.setenv("SM_CURRENT_HOST", "elsewhere")
    with pytest.raises(ValueError, match=r"SM_CURRENT_HOST must be one of SM_HOSTS"):
        estimator_dist.make_run_config("multi_worker")


def test_make_run_config_parameter_server_from_vertex_sets_tf_config(monkeypatch):
    spec = {"cluster": {"workerpool0": ["127.0.0.1:2000"], "workerpool1": ["127.0.0.1:2001"],
                        "workerpool2": ["127.0.0.1:2002"]},
            "task": {"type": "workerpool2", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", "")  # Empty counts as unset; put back afterwards.
    monkeypatch.setenv("CLUSTER_SPEC", json.dumps(spec))
    config = estimator_dist.make_run_config("parameter_server")
    written = json.loads(os.environ["TF_CONFIG"])
    assert written["task"] == {"type": "ps", "index": 0}
    assert config.cluster_spec.as_dict()["ps"] == ["127.0.0.1:2002"]


# The files docs/cluster.md shows: each task's environment must resolve to the cluster
# the file means. The Kubeflow operator is emulated: lower-case task types, addresses
# <job>-<type>-<i>.<namespace>.svc:<tfjob-port>, the evaluator in or out of the cluster.
_DOCS = os.path.join(REPO_ROOT, "docs", "cluster")


def _tfjob_environments(manifest, evaluator_in_cluster):
    name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    specs = manifest["spec"]["tfReplicaSpecs"]
    replicas = {t.lower(): spec["replicas"] for t, spec in specs.items()}
    ports = {t.lower(): next(p["containerPort"] for c in spec["template"]["spec"]["containers"]
                             for p in c.get("ports", ()) if p["name"] == "tfjob-port")
             for t, spec in manifest["spec"]["tfReplicaSpecs"].items()}
    spec = {t: [f"{name}-{t}-{i}.{namespace}.svc:{ports[t]}" for i in range(n)]
            for t, n in replicas.items() if evaluator_in_cluster or t != "evaluator"}
    return {(t, i): {"TF_CONFIG": _tfjob_tf_config(spec, t, i)}
            for t, n in replicas.items() for i in range(n)}


def _manifest(filename):
    with open(os.path.join(_DOCS, filename), encoding="utf-8") as file:
        return yaml.safe_load(file)


def _command(manifest):
    containers = manifest["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"]
    return containers[0]["command"]


@pytest.mark.parametrize("evaluator_in_cluster", [False, True])
def test_docs_tfjob_multi_worker_resolves_to_chief_two_workers_evaluator(evaluator_in_cluster):
    manifest = _manifest("tfjob-multi-worker.yaml")
    command = _command(manifest)
    assert command[:3] == ["python", "-m", "estimator_dist.train"]
    assert command[command.index("--strategy") + 1] == "multi_worker"
    configs = {task: cluster_sources.resolve_cluster(env)[0]
               for task, env in _tfjob_environments(manifest, evaluator_in_cluster).items()}
    assert sorted(configs) == [("chief", 0), ("evaluator", 0), ("worker", 0), ("worker", 1)]
    assert [task for task, config in configs.items() if config.is_chief] == [("chief", 0)]
    assert {config.num_workers for config in configs.values()} == {3}
    assert configs[("worker", 1)].cluster["worker"][1] == "dense-worker-1.training.svc:2222"


def test_docs_tfjob_parameter_server_resolves_with_two_ps():
    manifest = _manifest("tfjob-parameter-server.yaml")
    assert _command(manifest)[_command(manifest).index("--strategy") + 1] == "parameter_server"
    configs = {task: cluster_sources.resolve_cluster(env)[0]
               for task, env in _tfjob_environments(manifest, False).items()}
    assert sorted(configs) == [("chief", 0), ("evaluator", 0), ("ps", 0), ("ps", 1),
                               ("worker", 0), ("worker", 1)]
    assert all(len(c.cluster["ps"]) == 2 and "chief" in c.cluster for c in configs.values())


def test_docs_networkpolicy_selects_the_multi_worker_pods():
    policy = _manifest("networkpolicy.yaml")
    pod = _manifest("tfjob-multi-worker.yaml")["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    labels = pod["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    ingress = policy["spec"]["ingress"][0]
    assert ingress["from"][0]["podSelector"]["matchLabels"].items() <= labels.items()
    assert ingress["ports"][0]["port"] == 2222


def test_docs_sbatch_tasks_resolve_to_one_worker_per_node():
    with open(os.path.join(_DOCS, "train.sbatch"), encoding="utf-8") as file:
        text = file.read()
    options = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", text, re.MULTILINE))
    nodes, per_node = int(options["nodes"]), int(options["ntasks-per-node"])
    assert re.search(r"^srun python -m estimator_dist\.train \\\n\s+--strategy multi_worker",
                     text, re.MULTILINE)
    hosts = [f"node{i}" for i in range(1, nodes + 1)]
    configs = [cluster_sources.resolve_cluster({
        "SLURM_PROCID": str(rank), "SLURM_STEP_NODELIST": f"node[1-{nodes}]",
        "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x{nodes})"})[0]
        for rank in range(nodes * per_node)]
    assert {json.dumps(c.cluster) for c in configs} == {
        json.dumps({"worker": [f"{h}:8888" for h in hosts]})}
    assert [c.task_index for c in configs] == list(range(nodes * per_node))
    assert [c.is_chief for c in configs] == [True] + [False] * (nodes * per_node - 1)


def test_multi_worker_strategy_refuses_master_task_type():
    """The fact behind renaming 'master' to 'chief' (read: multi_worker_util)."""
    spec = tf.train.ClusterSpec({"master": ["a:1"], "worker": ["b:2"]})
    with pytest.raises(ValueError, match=r"Disallowed task type found in cluster spec"):
        multi_worker_util._validate_cluster_spec(spec, "master", 0)


@pytest.mark.parametrize("filename", sorted(os.listdir(_DOCS)))
def test_docs_cluster_md_quotes_each_file_as_it_is(filename):
    with open(os.path.join(REPO_ROOT, "docs", "cluster.md"), encoding="utf-8") as file:
        doc = file.read()
    with open(os.path.join(_DOCS, filename), encoding="utf-8") as file:
        assert file.read() in doc


def test_tensorflow_filesystems_gs_built_in_s3_not():
    """The fact docs/cluster.md states: gs:// needs nothing more, s3:// needs tensorflow-io."""
    schemes = tf.io.gfile.get_registered_schemes()
    assert "gs" in schemes and "s3" not in schemes
