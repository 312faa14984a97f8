"""Every model_fn through TRAIN, EVAL and PREDICT under default, mirrored-2 and TPUEstimator."""
import dataclasses

import numpy as np
import pytest

import model_fns
from tests.model_fns import harness

ROWS = 32


@dataclasses.dataclass(frozen=True)
class Case:
    model_fn: object
    params: dict
    features: dict
    labels: np.ndarray
    metrics: tuple  # eval metrics besides loss and global_step
    predictions: dict  # prediction key -> shape of one row


CASES = {
    "dense": Case(
        model_fns.dense_classifier_model_fn,
        {"hidden_units": [8, 8], "num_classes": 3, "learning_rate": 0.1, "dropout": 0.1,
         "batch_norm": True, "optimizer": "momentum"},
        {"x": harness.floats(ROWS, 5)}, harness.classes(ROWS, 3),
        ("accuracy",), {"logits": (3,), "probabilities": (3,), "classes": ()}),
    "dense_binary": Case(
        model_fns.dense_classifier_model_fn,
        {"hidden_units": [4], "num_classes": 2, "learning_rate": 0.1, "clip_norm": 1.0},
        {"x": harness.floats(ROWS, 5)}, harness.classes(ROWS, 2),
        ("accuracy", "auc"), {"logits": (2,), "probabilities": (2,), "classes": ()}),
    "lstm": Case(
        model_fns.lstm_model_fn,
        {"num_units": 8, "num_classes": 3, "learning_rate": 0.05, "num_layers": 2,
         "dropout": 0.1, "clip_norm": 1.0, "optimizer": "rmsprop"},
        {"x": harness.floats(ROWS, 6, 2)}, harness.classes(ROWS, 3),
        ("accuracy",), {"logits": (3,), "classes": (), "state_c": (16,), "state_h": (16,)}),
    "lstm_regression": Case(
        model_fns.lstm_model_fn,
        {"num_units": 4, "task": "regression", "num_outputs": 2, "output": "sequence",
         "learning_rate": 0.05, "optimizer": "sgd"},
        {"x": harness.floats(ROWS, 6, 2),
         "sequence_length": np.arange(ROWS, dtype=np.int32) % 6 + 1},
        harness.floats(ROWS, 6, 2, seed=1),
        ("rmse", "mae"), {"logits": (6, 2), "predictions": (6, 2), "state_c": (4,)}),
    "lstm_stateful": Case(
        model_fns.lstm_model_fn,
        {"num_units": 4, "num_classes": 2, "output": "sequence", "num_streams": ROWS,
         "learning_rate": 0.05},
        {"x": harness.floats(ROWS, 5, 1), "stream": np.arange(ROWS, dtype=np.int32),
         "reset": np.arange(ROWS) % 3 == 0},
        harness.classes(ROWS, 2, shape=(5,)),
        ("accuracy", "auc"), {"logits": (5, 2), "probabilities": (5, 2), "state_h": (4,)}),
}


@pytest.mark.slow
@pytest.mark.parametrize("strategy", harness.STRATEGIES)
@pytest.mark.parametrize("case_name", sorted(CASES))
def test_model_fn_trains_evaluates_predicts_under_strategy(model_dir, case_name, strategy):
    case = CASES[case_name]
    run = harness.run_all_modes(case.model_fn, case.params, case.features, case.labels,
                                strategy=strategy, model_dir=model_dir)
    assert run.global_step == 3
    assert np.isfinite(run.metrics["loss"])
    assert set(case.metrics) <= set(run.metrics)
    assert all(np.isfinite(run.metrics[name]) for name in case.metrics)
    assert len(run.predictions) == ROWS
    for key, shape in case.predictions.items():
        assert np.shape(run.predictions[0][key]) == shape, key
