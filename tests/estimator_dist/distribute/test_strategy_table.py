"""The one table of strategies: every name has a builder, and everything reads it."""
import pytest

from estimator_dist.commands import train
from estimator_dist.job import settings as settings_lib
from estimator_dist.distribute import strategies, strategy_table
from estimator_dist.errors import UsageError


def test_strategies_each_name_has_a_builder_or_is_tpu():
    built = {name for name, kind in strategy_table.STRATEGIES.items() if not kind.tpu}
    assert set(strategies._STRATEGIES) == built  # pylint: disable=protected-access


def test_cli_choices_are_the_table():
    (action,) = [a for a in train.train_parser()._actions  # pylint: disable=protected-access
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
