"""The mends' registry: every entry complete, installation explicit, checked and listed."""
import dataclasses
import importlib
import pathlib
import re

import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist import mends
from estimator_dist.distribute import strategies, strategy_table
from estimator_dist.errors import UsageError
from estimator_dist.mends import catalogue, import_hook, registry, releases

_ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", catalogue.NAMES)
def test_mend_entry_names_an_existing_test(name):
    path, test = catalogue.MENDS[name].test.split("::")
    assert f"def {test}(" in (_ROOT / path).read_text(), catalogue.MENDS[name].test


@pytest.mark.parametrize("name", catalogue.NAMES)
def test_mend_entry_scope_and_strategies_are_known(name):
    mend = catalogue.MENDS[name]
    assert mend.scope in catalogue.SCOPES
    facts = {field.name for field in dataclasses.fields(strategy_table.StrategyKind)
             if field.type == "bool"}
    assert {fact.removeprefix("not ") for fact in mend.needs or ()} <= facts
    assert set(strategy_table.names_where(mend.needed_by)) <= set(strategy_table.NAMES)
    assert mend.defect and mend.changes and mend.turn_off.endswith(name)


@pytest.mark.parametrize("name", catalogue.NAMES)
def test_mend_module_has_its_entry_point(name):
    mend = catalogue.MENDS[name]
    module = importlib.import_module(mend.module)
    assert callable(getattr(module, "install" if mend.scope in ("import", "process")
                            else "apply"))


@pytest.mark.parametrize("name", catalogue.NAMES)
def test_mend_lives_in_the_mends_folder(name):
    assert catalogue.MENDS[name].module.startswith("estimator_dist.mends.")


def test_installed_lists_what_make_run_config_installed():
    estimator_dist.make_run_config("mirrored", num_replicas=2)
    assert {"early_stopping", "divergence_check"} <= set(mends.installed())


def test_install_for_is_idempotent():
    mends.install_for(strategy_table.kind_of("default"))
    hook_maker = tf.estimator.experimental.make_early_stopping_hook
    mends.install_for(strategy_table.kind_of("default"))
    assert tf.estimator.experimental.make_early_stopping_hook is hook_maker


def test_version_mismatch_refused_at_install(monkeypatch):
    monkeypatch.setattr(releases, "tensorflow_release", lambda: "2.22")
    with pytest.raises(UsageError, match=r"^tensorflow must be one of 2\.15, 2\.16-2\.21 for "
                                         r"mend 'early_stopping' .*ESTIMATOR_DIST_MENDS_OFF="
                                         r"early_stopping\)\. Received: tensorflow=2\.22$"):
        estimator_dist.make_run_config("default")


def test_version_mismatch_said_in_one_line_where_tensorflow_is_imported(monkeypatch, capsys):
    """The import mends are installed inside ``import tensorflow`` (the start hook's, in a
    program that never imports the package): a release never checked is said, not raised."""
    monkeypatch.setattr(releases, "tensorflow_release", lambda: "2.22")
    applied = []
    monkeypatch.setattr(registry, "apply", applied.append)
    import_hook._install_import_scope()
    assert not applied
    assert re.fullmatch(r"estimator_dist: tensorflow must be one of 2\.15, 2\.16-2\.21 for "
                        r"the package's mends .*Received: tensorflow=2\.22 \(tf\.estimator is "
                        r"not restored\)\n", capsys.readouterr().err)


def test_estimator_release_other_than_2_15_refused(monkeypatch):
    monkeypatch.setattr(releases, "_versions", lambda: {"tensorflow-estimator": "2.14.0"})
    with pytest.raises(UsageError, match=r"^tensorflow-estimator must be 2\.15\.x .*"
                                         r"Received: tensorflow-estimator=2\.14\.0$"):
        estimator_dist.make_run_config("default")


def test_release_from_distribution_metadata_when_tensorflow_not_imported(monkeypatch):
    monkeypatch.delitem(releases.sys.modules, "tensorflow")
    monkeypatch.setattr(releases, "_versions",
                        lambda: {"tensorflow-cpu": "2.15.1", "tensorflow": "2.21.0"})
    assert releases.tensorflow_release() == "2.21"
    monkeypatch.setattr(releases, "_versions", lambda: {"numpy": "2.0.0"})
    assert releases.tensorflow_release() is None


def test_mend_of_other_releases_not_applied(monkeypatch):
    mend = catalogue.MENDS["estimator_api"]
    monkeypatch.setattr(releases, "tensorflow_release", lambda: "2.15")
    assert not releases.applies(mend)
    monkeypatch.setattr(releases, "tensorflow_release", lambda: "2.21")
    assert releases.applies(mend)


def test_turned_off_unknown_name_lists_the_mends(monkeypatch):
    monkeypatch.setenv(mends.OFF_VARIABLE, "early_stoping")
    with pytest.raises(UsageError, match=r"^ESTIMATOR_DIST_MENDS_OFF must list mends among "
                                         r"all, estimator_api_name, .*Received: "):
        mends.turned_off()


def test_turned_off_all_names_every_mend_but_the_restoring_ones(monkeypatch):
    monkeypatch.setenv(mends.OFF_VARIABLE, "all")
    restoring = {name for name, mend in catalogue.MENDS.items() if mend.restores}
    assert {"estimator_api", "estimator_training", "python_estimator"} <= restoring
    assert mends.turned_off() == frozenset(catalogue.NAMES) - restoring
    monkeypatch.setenv(mends.OFF_VARIABLE, "all,estimator_api")
    assert mends.turned_off() == frozenset(catalogue.NAMES) - restoring | {"estimator_api"}


def test_turned_off_known_only_leaves_an_unknown_name_out(monkeypatch):
    monkeypatch.setenv(mends.OFF_VARIABLE, "early_stoping,divergence_check")
    assert registry.turned_off(known_only=True) == {"divergence_check"}
    assert registry.unknown_off_names().endswith(
        "Received: ESTIMATOR_DIST_MENDS_OFF='early_stoping,divergence_check'")
    monkeypatch.setenv(mends.OFF_VARIABLE, "divergence_check")
    assert registry.unknown_off_names() is None


def test_restoring_mends_are_the_import_mends_of_current_tensorflow_only():
    for mend in catalogue.MENDS.values():
        assert not mend.restores or (mend.scope == "import"
                                     and mend.tensorflow == releases.CURRENT), mend.name


def test_turned_off_strategy_mend_leaves_the_strategy_as_tensorflow_builds_it(monkeypatch):
    monkeypatch.setenv(mends.OFF_VARIABLE, "divergence_check")
    strategy = strategies.build("mirrored", 2).train_distribute
    assert not hasattr(strategy.extended, "_make_divergence_hook")
    monkeypatch.delenv(mends.OFF_VARIABLE)
    strategy = strategies.build("mirrored", 2).train_distribute
    assert hasattr(strategy.extended, "_make_divergence_hook")


def test_turned_off_steps_per_run_refuses_a_loop(monkeypatch, model_dir):
    monkeypatch.setenv(mends.OFF_VARIABLE, "steps_per_run")
    config = estimator_dist.make_run_config(model_dir=model_dir)
    with pytest.raises(UsageError, match=r"^steps_per_run=4 needs mend 'steps_per_run', which "
                                         r"ESTIMATOR_DIST_MENDS_OFF turns off"):
        estimator_dist.make_estimator(lambda features, labels, mode: None, config,
                                      steps_per_run=4)


def test_apply_asked_for_process_mend_turned_off_refused(monkeypatch):
    monkeypatch.setenv(mends.OFF_VARIABLE, "loss_scaling")
    assert mends.apply("loss_scaling") is False
    with pytest.raises(UsageError, match=r"^mixed_precision='float16' needs mend "
                                         r"'loss_scaling', which ESTIMATOR_DIST_MENDS_OFF "
                                         r"turns off"):
        mends.apply("loss_scaling", asked="mixed_precision='float16'")


def test_tpu_guard_off_plain_estimator_takes_a_tpu_config(monkeypatch, model_dir):
    """TensorFlow's own behaviour: a plain Estimator accepts a TPU RunConfig (and would
    train on the host CPU)."""
    monkeypatch.setenv(mends.OFF_VARIABLE, "tpu_estimator_guard")
    config = estimator_dist.make_run_config("tpu", use_tpu=False, model_dir=model_dir)
    estimator = tf.estimator.DNNClassifier([8], [tf.feature_column.numeric_column("x")],
                                           config=config)
    assert estimator.config.train_distribute is None


def test_docs_list_every_mend():
    text = (_ROOT / "docs" / "mends.md").read_text()
    assert all(f"| `{name}` |" in text for name in catalogue.NAMES)


def _names(mend_name):
    """The strategies of the table whose facts need mend ``mend_name``."""
    return strategy_table.names_where(catalogue.MENDS[mend_name].needed_by)


def test_mend_strategies_agree_with_the_strategy_table():
    kinds = strategy_table.STRATEGIES
    assert _names("cluster_train") == strategy_table.CLUSTER_NAMES
    assert _names("evaluator_end") == strategy_table.CLUSTER_NAMES
    assert _names("steps_per_run") == tuple(
        name for name, kind in kinds.items() if kind.loops)
    assert _names("tpu_estimator_guard") == tuple(
        name for name, kind in kinds.items() if kind.tpu)
    assert _names("early_stopping") == tuple(
        name for name, kind in kinds.items() if not kind.tpu)


# Each strategy's mends of scopes process, strategy and estimator, in the catalogue's order,
# as each entry listed them by strategy name before the entries said facts instead.
_MENDS_OF = {
    "default": ("early_stopping", "steps_per_run", "tpu_estimator_kept",
                "custom_gradient_leak", "keras_2_seeds", "embedding_rows", "params_by_mode",
                "saver_graph_events"),
    "mirrored": ("early_stopping", "divergence_check", "steps_per_run", "tpu_estimator_kept",
                 "custom_gradient_leak", "keras_2_seeds", "embedding_rows", "params_by_mode",
                 "saver_graph_events"),
    "multi_worker": ("early_stopping", "cluster_train", "sparse_gradients",
                     "batch_norm_statistics", "divergence_check", "steps_per_run",
                     "tpu_estimator_kept", "custom_gradient_leak", "keras_2_seeds",
                     "embedding_rows", "params_by_mode", "collective_watchdog", "input_end",
                     "collective_keys", "collective_instances", "evaluator_end",
                     "bfloat16_all_reduce", "saver_graph_events"),
    "parameter_server": ("early_stopping", "cluster_train", "tpu_estimator_kept",
                         "custom_gradient_leak", "keras_2_seeds", "embedding_rows",
                         "params_by_mode", "evaluator_end", "saver_graph_events"),
    "tpu": ("tpu_estimator_guard", "tpu_validate_logging", "custom_gradient_leak",
            "keras_2_seeds", "embedding_rows"),
}


@pytest.mark.parametrize("name", strategy_table.NAMES)
def test_strategy_facts_give_each_strategy_its_mends(name):
    kind = strategy_table.kind_of(name)
    needed = tuple(mend.name for mend in catalogue.MENDS.values()
                   if mend.scope != "import" and mend.needed_by(kind))
    assert needed == _MENDS_OF[name]
    assert all(mend.needed_by(kind) for mend in catalogue.MENDS.values()
               if mend.scope == "import")


def _installed_for(kind, monkeypatch):
    """The mends ``install_for(kind)`` applies, in order (recorded, not installed)."""
    applied = []
    monkeypatch.setattr(registry, "apply", applied.append)
    mends.install_for(kind)
    return applied


@pytest.mark.parametrize("name", strategy_table.NAMES)
def test_install_for_installs_the_process_mends_of_the_strategy(name, monkeypatch):
    process = [mend for mend in _MENDS_OF[name] if catalogue.MENDS[mend].scope == "process"]
    assert _installed_for(strategy_table.kind_of(name), monkeypatch) == process


def test_mends_asked_for_are_never_installed_for_a_strategy():
    asked = [mend.name for mend in catalogue.MENDS.values() if mend.needs is None]
    assert asked == ["loss_scaling", "coordination_heartbeat"]
    assert not any(catalogue.MENDS[name].needed_by(kind) for name in asked
                   for kind in strategy_table.STRATEGIES.values())
