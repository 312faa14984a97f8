"""The one table of strategies: every name has a builder, and everything reads it."""
import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist import plan
from estimator_dist.commands import train
from estimator_dist.job import settings as settings_lib
from estimator_dist.distribute import strategies, strategy_table
from estimator_dist.errors import UsageError
from estimator_dist.mends import catalogue, registry


def test_strategies_each_name_has_a_builder_or_is_tpu():
    for kind in strategy_table.STRATEGIES.values():
        assert kind.tpu == (kind.builder is None), kind.name
        assert kind.tpu or callable(strategies.builder_of(kind)), kind.name


def test_cli_choices_are_the_table():
    (action,) = [a for a in train.train_parser()._actions
                 if "--strategy" in a.option_strings]
    assert tuple(action.choices) == strategy_table.NAMES


def test_settings_refuse_a_name_outside_the_table():
    with pytest.raises(UsageError, match=r"strategy must be one of default, mirrored, "
                                         r"multi_worker, parameter_server, tpu\. "
                                         r"Received: strategy='mirorred'"):
        settings_lib.RunSettings(strategy="mirorred")


def test_cluster_names_are_the_kinds_with_cluster_tasks():
    assert strategy_table.CLUSTER_NAMES == ("multi_worker", "parameter_server")


def test_kind_of_unknown_name_lists_the_valid_ones():
    with pytest.raises(UsageError, match=r"strategy must be one of 'default', 'mirrored', "
                                         r"'multi_worker', 'parameter_server', 'tpu'\. "
                                         r"Received: strategy='mirorred'"):
        strategy_table.kind_of("mirorred")


def test_build_tpu_names_make_run_config():
    with pytest.raises(UsageError, match=r"strategy 'tpu' runs through TPUEstimator's own "
                                         r"RunConfig: build it with "
                                         r"estimator_dist\.make_run_config\('tpu'\)"):
        strategies.build("tpu")


def _one_device(num_replicas, options, tf_config):
    """The builder of a strategy added by a test: one device, through tf.distribute."""
    del num_replicas, options, tf_config  # build() checks them against the kind.
    return strategies.StrategySetup(tf.distribute.OneDeviceStrategy("/cpu:0"),
                                    cpu_devices=strategies.cpu_device_count())


@pytest.fixture(name="added_strategy")
def _added_strategy(monkeypatch):
    """A new strategy: one ``StrategyKind`` record naming one builder, nothing else."""
    kind = strategy_table.StrategyKind("one_device", builder=f"{__name__}:_one_device",
                                       one_replica="")
    monkeypatch.setitem(strategy_table.STRATEGIES, kind.name, kind)
    return kind


def test_added_strategy_reaches_make_run_config(added_strategy, model_dir):
    config = estimator_dist.make_run_config(added_strategy.name, model_dir=model_dir,
                                            steps_per_run=2)
    assert isinstance(config.train_distribute, tf.distribute.OneDeviceStrategy)
    assert config.steps_per_run == 2
    with pytest.raises(UsageError, match=r"num_replicas must be 1 or None for strategy "
                                         r"'one_device'\. Received: num_replicas=2"):
        estimator_dist.make_run_config(added_strategy.name, num_replicas=2)


def test_added_strategy_gets_the_mends_of_its_facts(added_strategy, model_dir, monkeypatch):
    """No mend names the new strategy: its facts (no cluster, no TPU, steps looped, no
    collectives, no mirrored variables) call for the mends "default" gets, the same facts."""
    installed = []
    monkeypatch.setattr(registry, "apply", installed.append)
    estimator_dist.make_run_config(added_strategy.name, model_dir=model_dir)
    assert installed == ["early_stopping", "tpu_estimator_kept", "custom_gradient_leak",
                         "keras_2_seeds", "embedding_rows"]
    needed = [name for name, mend in catalogue.MENDS.items()
              if mend.scope != "import" and mend.needed_by(added_strategy)]
    assert needed == ["early_stopping", "steps_per_run", "tpu_estimator_kept",
                      "custom_gradient_leak", "keras_2_seeds", "embedding_rows",
                      "params_by_mode", "saver_graph_events"]


def test_added_strategy_reaches_the_plan(added_strategy, model_dir):
    resolved = plan.resolve(added_strategy.name, model_dir=model_dir)
    assert resolved.kind is added_strategy
    assert (resolved.replicas, resolved.task, resolved.is_chief) == (1, None, True)
    assert isinstance(resolved.config.train_distribute, tf.distribute.OneDeviceStrategy)


def test_kind_handed_down_is_not_looked_up_again(monkeypatch, model_dir):
    kind = strategy_table.kind_of("mirrored")
    looked_up = []
    monkeypatch.setattr(strategy_table, "kind_of", looked_up.append)
    resolved = plan.resolve(kind, num_replicas=2, model_dir=model_dir)
    assert (resolved.kind, resolved.replicas, looked_up) == (kind, 2, [])
