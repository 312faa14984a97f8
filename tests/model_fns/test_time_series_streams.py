"""lstm_model_fn in stateful mode on input_fns.time_series_streams, as docs/models.md shows."""
import numpy as np
import pytest
import tensorflow as tf

from input_fns import time_series_streams
from tests.model_fns import harness
from tests.model_fns.test_stream_state import seeded_lstm_model_fn

STREAMS, WINDOW, STEPS = 4, 6, 5
PARAMS = {"num_units": 5, "task": "regression", "num_outputs": 1, "output": "sequence",
          "num_streams": STREAMS, "learning_rate": 0.1, "optimizer": "sgd"}


def _train(strategy, model_dir):
    series = np.sin(np.arange(200) * 0.2)[:, None].astype(np.float32)
    estimator = harness.make_estimator(seeded_lstm_model_fn, PARAMS, strategy, model_dir,
                                       batch_size=STREAMS)
    estimator.train(time_series_streams(series, num_streams=STREAMS, window=WINDOW),
                    max_steps=STEPS)
    return estimator


@pytest.mark.slow
def test_time_series_streams_mirrored_matches_one_device(tmp_path):
    one = _train("default", str(tmp_path / "one"))
    mirrored = _train("mirrored", str(tmp_path / "mirrored"))
    for name in ("rnn/basic_lstm_cell/kernel", "stream_state/h"):
        np.testing.assert_allclose(mirrored.get_variable_value(name),
                                   one.get_variable_value(name), atol=1e-5)
    assert np.abs(one.get_variable_value("stream_state/h")).min() > 0.0
    assert tf.train.load_checkpoint(one.model_dir).get_tensor("global_step") == STEPS
