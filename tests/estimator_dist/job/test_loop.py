"""The train and evaluate loop of a task outside a cluster."""
import pytest

from estimator_dist.job import loop


@pytest.mark.parametrize("start, every, stops", [
    (0, 4, [4, 8, 10]), (5, 4, [8, 10]), (8, 4, [10]), (0, None, [10]), (0, 10, [10])])
def test_eval_stops_at_each_checkpoint_step_then_the_end(start, every, stops):
    assert loop._eval_stops(start, 10, every) == stops


def test_newest_step_of_an_empty_model_dir_is_0(tmp_path):
    assert loop.newest_step(str(tmp_path)) == 0
