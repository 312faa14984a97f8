"""make_run_config: the strategy table, session wiring and argument checks."""
import json
import re
import sys

import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist import run_config_facts
from estimator_dist.distribute import run_config


def test_strategy_unknown_lists_valid_names():
    with pytest.raises(ValueError, match=r"'default', 'mirrored', 'multi_worker', "
                                         r"'parameter_server', 'tpu'.*"
                                         r"Received: strategy='mirorred'"):
        estimator_dist.make_run_config("mirorred")


def test_strategy_default_has_no_distribution(model_dir):
    config = estimator_dist.make_run_config(model_dir=model_dir)
    assert isinstance(config, tf.estimator.RunConfig)
    assert config.train_distribute is None and config.eval_distribute is None
    assert config.model_dir == model_dir


@pytest.mark.parametrize("replicas", [2, 4])
def test_strategy_mirrored_replicas_in_sync(replicas):
    config = estimator_dist.make_run_config("mirrored", num_replicas=replicas)
    assert config.train_distribute.num_replicas_in_sync == replicas
    assert config.eval_distribute is None  # Exact evaluation on one device (test_exact_eval.py).
    assert config.session_config.device_count["CPU"] >= replicas


def test_strategy_mirrored_reduces_through_one_device_on_cpu():
    strategy = estimator_dist.make_run_config("mirrored", num_replicas=2).train_distribute
    assert isinstance(strategy.extended._cross_device_ops, tf.distribute.ReductionToOneDevice)


def test_run_config_kwargs_pass_through():
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, tf_random_seed=3,
                                            save_checkpoints_steps=7, keep_checkpoint_max=2)
    assert (config.tf_random_seed, config.save_checkpoints_steps,
            config.keep_checkpoint_max) == (3, 7, 2)


def test_session_config_user_fields_kept_and_devices_added():
    user = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=3)
    config = estimator_dist.make_run_config("mirrored", num_replicas=4, session_config=user)
    assert config.session_config.inter_op_parallelism_threads == 3
    assert config.session_config.device_count["CPU"] >= 4
    assert "CPU" not in user.device_count  # The caller's proto is not changed.


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_num_replicas_not_positive_int_rejected(value):
    with pytest.raises(ValueError, match=r"num_replicas must be a positive int\. Received"):
        estimator_dist.make_run_config("mirrored", num_replicas=value)


@pytest.mark.parametrize("strategy", ["default", "multi_worker", "parameter_server"])
def test_num_replicas_above_one_rejected_without_replicas(strategy):
    with pytest.raises(ValueError,
                       match=f"num_replicas must be 1 or None for strategy '{strategy}'"):
        estimator_dist.make_run_config(strategy, num_replicas=2)


def test_train_distribute_kwarg_rejected():
    with pytest.raises(ValueError, match=r"train_distribute is set by make_run_config"):
        estimator_dist.make_run_config(
            train_distribute=tf.distribute.OneDeviceStrategy("/cpu:0"))


def test_collective_timeout_outside_multi_worker_rejected():
    with pytest.raises(ValueError, match=r"collective_timeout applies to strategy 'multi_worker'"):
        estimator_dist.make_run_config("mirrored", collective_timeout=10)


def test_tpu_arguments_outside_tpu_rejected():
    with pytest.raises(ValueError, match=r"tpu and use_tpu apply to strategy 'tpu' only"):
        estimator_dist.make_run_config("mirrored", use_tpu=False)


@pytest.mark.parametrize("text, fault", [
    (None, "TF_CONFIG must be set"),
    ("{", "TF_CONFIG must be valid JSON"),
    (json.dumps({"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 3}}),
     r"TF_CONFIG task index must be in \[0, 1\)"),
])
def test_multi_worker_bad_tf_config_names_tf_config(monkeypatch, text, fault):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    if text is not None:
        monkeypatch.setenv("TF_CONFIG", text)
    with pytest.raises(ValueError, match=fault):
        estimator_dist.make_run_config("multi_worker")


@pytest.mark.parametrize("cluster_spec", [{"worker": ["127.0.0.1:1"]},
                                          {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}])
def test_parameter_server_without_ps_or_chief_names_tf_config(monkeypatch, cluster_spec):
    task = {"type": "worker", "index": 0}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster_spec, "task": task}))
    with pytest.raises(ValueError, match=r"TF_CONFIG must list 'chief' and 'ps' tasks for "
                                         r"strategy 'parameter_server'"):
        estimator_dist.make_run_config("parameter_server")


def test_parameter_server_evaluator_reads_checkpoints_alone(monkeypatch):
    spec = {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": spec,
                                                "task": {"type": "evaluator", "index": 0}}))
    config = estimator_dist.make_run_config("parameter_server")
    assert config.train_distribute is None and config.task_type == "evaluator"


def test_tpu_without_tpu_raises_one_sentence(monkeypatch):
    monkeypatch.delenv("TPU_NAME", raising=False)
    with pytest.raises(ValueError, match=r"strategy 'tpu' found no TPU .*use_tpu=False") as info:
        estimator_dist.make_run_config("tpu")
    assert "\n" not in str(info.value)


def test_tpu_validation_mode_builds_tpu_estimator(model_dir):
    config = estimator_dist.make_run_config("tpu", use_tpu=False, model_dir=model_dir)
    assert isinstance(config, run_config.TPURunConfig) and not config.use_tpu
    estimator = estimator_dist.make_estimator(lambda features, labels, mode, params: None,
                                              config, batch_size=8)
    assert isinstance(estimator, tf.compat.v1.estimator.tpu.TPUEstimator)


def test_tpu_validation_mode_rejects_shards():
    with pytest.raises(ValueError, match=r"num_replicas must be 1 or None when validating on CPU"):
        estimator_dist.make_run_config("tpu", use_tpu=False, num_replicas=8)


def test_make_estimator_plain_estimator_for_other_strategies(model_dir):
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir)
    estimator = estimator_dist.make_estimator(lambda features, labels, mode: None, config)
    assert type(estimator) is tf.estimator.Estimator


def test_make_estimator_tpu_needs_batch_size(model_dir):
    config = estimator_dist.make_run_config("tpu", use_tpu=False, model_dir=model_dir)
    with pytest.raises(ValueError, match=r"batch_size must be given for a TPUEstimator"):
        estimator_dist.make_estimator(lambda features, labels, mode, params: None, config)


def test_session_config_keeps_devices_count_not_lowered():
    base = tf.compat.v1.ConfigProto(device_count={"CPU": 8})
    assert run_config.cpu_session_config(2, base).device_count["CPU"] == 8
    assert run_config.cpu_session_config(2).device_count["CPU"] == 2


def test_parameter_server_builds_on_the_given_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)  # Read from the environment: "must be set".
    given = estimator_dist.parse_tf_config(json.dumps(
        {"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}}))
    with pytest.raises(ValueError, match=r"TF_CONFIG must list 'chief' and 'ps' tasks.*"
                                         r"Received: cluster task types \['worker'\]"):
        estimator_dist.make_run_config("parameter_server", tf_config=given)


def test_tf_config_with_a_one_process_strategy_refused():
    given = estimator_dist.parse_tf_config(json.dumps(
        {"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}}))
    with pytest.raises(ValueError, match=r"tf_config applies to strategies 'multi_worker' and "
                                         r"'parameter_server' only\. "
                                         r"Received: strategy='mirrored'"):
        estimator_dist.make_run_config("mirrored", tf_config=given)


def test_replace_session_config_keeps_strategy_devices():
    config = estimator_dist.make_run_config("mirrored", num_replicas=2).replace(
        session_config=tf.compat.v1.ConfigProto(device_count={"GPU": 0}))
    assert isinstance(config, tf.estimator.RunConfig)
    assert config.session_config.device_count["CPU"] >= 2
    assert config.session_config.device_count["GPU"] == 0
    assert config.train_distribute.num_replicas_in_sync == 2


def test_replace_session_config_plain_run_config_drops_devices():
    """The failure ``StrategyRunConfig.replace`` mends: TensorFlow's replace takes the new
    ConfigProto as it is, so the session keeps one CPU device and replica 1 has none."""
    config = tf.estimator.RunConfig(
        session_config=run_config.cpu_session_config(2)).replace(
            session_config=tf.compat.v1.ConfigProto(device_count={"GPU": 0}))
    assert "CPU" not in config.session_config.device_count


def test_replace_keeps_run_config_type_and_settings(tmp_path):
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, steps_per_run=3)
    replaced = config.replace(model_dir=tmp_path / "m", tf_random_seed=5,
                              save_checkpoints_steps=4)
    assert type(replaced) is type(config)
    assert (replaced.model_dir, replaced.tf_random_seed, replaced.save_checkpoints_steps,
            replaced.steps_per_run) == (str(tmp_path / "m"), 5, 4, 3)
    assert config.model_dir != replaced.model_dir  # A copy; the original is unchanged.


def test_run_facts_are_declared_properties_kept_by_replace():
    config = estimator_dist.make_run_config("default", steps_per_run=4,
                                            mixed_precision=None)
    replaced = config.replace(tf_random_seed=5)
    assert isinstance(replaced, run_config_facts.RunFacts)
    assert (replaced.steps_per_run, replaced.mixed_precision) == (4, None)
    assert isinstance(type(config).steps_per_run, property)  # Declared, not stuck on.


def test_run_facts_checked_when_set():
    config = estimator_dist.make_run_config()
    with pytest.raises(ValueError, match=r"steps_per_run must be a positive int\. "
                                         r"Received: steps_per_run=0"):
        config.steps_per_run = 0
    with pytest.raises(ValueError, match=r"mixed_precision must be None, 'bfloat16' or "
                                         r"'float16'\. Received: mixed_precision='fp8'"):
        config.mixed_precision = "fp8"


def test_run_facts_of_a_plain_run_config_are_the_defaults():
    config = tf.estimator.RunConfig()
    assert run_config_facts.steps_per_run_of(config) == 1
    assert run_config_facts.mixed_precision_of(config) is None


@pytest.mark.parametrize("key", ["train_distribute", "eval_distribute"])
def test_replace_strategy_refused_naming_make_run_config(key):
    config = estimator_dist.make_run_config("mirrored", num_replicas=2)
    with pytest.raises(ValueError, match=rf"{key} is set by make_run_config from the strategy "
                                         r"name; call estimator_dist\.make_run_config\("):
        config.replace(**{key: tf.distribute.OneDeviceStrategy("/cpu:0")})


def test_replace_session_config_tpu_validation_keeps_devices():
    config = estimator_dist.make_run_config("tpu", use_tpu=False).replace(
        session_config=tf.compat.v1.ConfigProto(device_count={"GPU": 0}))
    assert isinstance(config, run_config.TPURunConfig) and not config.use_tpu
    assert config.session_config.device_count["CPU"] == 4  # conftest's logical devices.


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(240)
def test_multi_worker_after_runtime_started_names_the_fix(python_run):
    """TF2 behaviour only: in graph mode the session configures the collectives. The first
    task to fail ends the cluster, so the other may not get as far."""
    code = ("import tensorflow as tf\n"
            "print(tf.reduce_sum(tf.constant([1.0, 2.0])))\n"
            "import estimator_dist\n"
            "estimator_dist.make_run_config('multi_worker')\n")
    done = python_run(["-m", "estimator_dist.launch", "--workers", "2", "--timeout", "150",
                       "--", sys.executable, "-c", code], timeout=200)
    assert done.returncode == 1, done.stderr[-2000:]
    assert re.search(r"\] RuntimeError: multi_worker configures TensorFlow's collective ops, "
                     r".*call estimator_dist\.make_run_config at the start of the program, "
                     r"before any TensorFlow op runs\.", done.stdout), done.stdout[-3000:]
    assert "Collective ops must be configured at program startup" not in done.stdout


@pytest.mark.parametrize("option,value", [("all_reduce_dtype", "bfloat16"),
                                          ("all_reduce_bytes_per_pack", 2**20)])
def test_all_reduce_options_outside_multi_worker_rejected(option, value):
    with pytest.raises(ValueError, match=f"{option} applies to strategy 'multi_worker' only"):
        estimator_dist.make_run_config("mirrored", **{option: value})


@pytest.mark.parametrize("option,value,rule", [
    ("all_reduce_dtype", "float8", r"must be one of \['bfloat16', 'float32'\]"),
    ("all_reduce_bytes_per_pack", -1, "must be a non-negative int"),
])
def test_all_reduce_options_bad_value_rejected_before_the_rendezvous(monkeypatch, option,
                                                                      value, rule):
    # The one worker's address answers nobody: a rendezvous would wait, the check does not.
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["127.0.0.1:1"]},
                                                "task": {"type": "worker", "index": 0}}))
    with pytest.raises(ValueError, match=f"{option} {rule}. Received: {option}={value!r}"):
        estimator_dist.make_run_config("multi_worker", **{option: value})
