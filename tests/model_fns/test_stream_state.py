"""Stateful truncated BPTT: carried state is equal on one device, mirrored-2 and two workers."""
import glob
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import model_fns
from tests.model_fns import harness

v1 = tf.compat.v1
STREAMS, WINDOW, STEPS, UNITS = 4, 5, 8, 6
PARAMS = {"num_units": UNITS, "num_classes": 2, "output": "sequence", "num_streams": STREAMS,
          "learning_rate": 0.5, "optimizer": "sgd", "clip_norm": 0.5}


def _series():
    """Per stream: x [STEPS * WINDOW, 1], per-step labels and per-window resets.

    Every stream starts at window 0; stream 1 restarts at window 3.
    """
    t = np.arange(STEPS * WINDOW)
    x = np.sin(0.3 * t[None, :] * (1 + np.arange(STREAMS)[:, None] / 4))
    x = (x + 0.1 * harness.floats(STREAMS, STEPS * WINDOW)).astype(np.float32)[..., None]
    labels = (np.roll(x[..., 0], -1, axis=1) > x[..., 0]).astype(np.int64)
    reset = np.zeros((STEPS, STREAMS), bool)
    reset[0, :] = reset[3, 1] = True
    return x, labels, reset


def streams_input_fn(first_step=0):
    """One window of every stream per step, in stream order, from ``first_step`` on.

    Under N replicas the dataset yields each step's batch as N per-replica elements, so
    replica r keeps streams [r * K / N, (r + 1) * K / N); with one input pipeline per
    worker, worker w reads replica w's elements.
    """
    x, labels, reset = _series()

    def input_fn(input_context=None):
        replicas = input_context.num_replicas_in_sync if input_context else 1
        pipelines = input_context.num_input_pipelines if input_context else 1
        pipeline = input_context.input_pipeline_id if input_context else 0
        per_replica = STREAMS // replicas
        steps = range(first_step, STEPS)
        window = [(x[:, s * WINDOW:(s + 1) * WINDOW], labels[:, s * WINDOW:(s + 1) * WINDOW],
                   reset[s]) for s in steps]

        def split(array):  # [steps, K, ...] -> [steps * replicas, K / replicas, ...]
            return array.reshape((len(steps) * replicas, per_replica) + array.shape[2:])

        features = {"x": split(np.stack([w[0] for w in window])),
                    "reset": split(np.stack([w[2] for w in window])),
                    "stream": split(np.tile(np.arange(STREAMS, dtype=np.int32),
                                            (len(steps), 1)))}
        dataset = tf.data.Dataset.from_tensor_slices(
            (features, split(np.stack([w[1] for w in window]))))
        return dataset.shard(pipelines, pipeline)

    return input_fn


def seeded_lstm_model_fn(features, labels, mode, params):
    """lstm_model_fn with seeded initializers, so every strategy starts from equal weights."""
    initializer = v1.glorot_uniform_initializer(seed=11)
    with v1.variable_scope(v1.get_variable_scope(), initializer=initializer):
        return model_fns.lstm_model_fn(features, labels, mode, params)


def _train(strategy, model_dir, legs):
    """Trains in ``legs`` (first step, last step) each with a fresh Estimator."""
    for first, last in legs:
        estimator = harness.make_estimator(seeded_lstm_model_fn, PARAMS, strategy, model_dir,
                                           batch_size=STREAMS, save_summary_steps=1)
        estimator.train(streams_input_fn(first), max_steps=last)
    return estimator


def _scalars(model_dir, tag):
    """The summary ``tag`` of every step, in step order."""
    values = {}
    for path in glob.glob(os.path.join(model_dir, "events.out.tfevents.*")):
        for event in v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    values[event.step] = value.simple_value
    return [values[step] for step in sorted(values)]


@pytest.mark.slow
def test_stream_state_mirrored_resumed_matches_one_device(tmp_path):
    one = _train("default", str(tmp_path / "one"), [(0, STEPS)])
    mirrored = _train("mirrored", str(tmp_path / "mirrored"), [(0, 4), (4, STEPS)])

    one_losses = _scalars(one.model_dir, "loss")
    assert len(one_losses) == STEPS
    np.testing.assert_allclose(_scalars(mirrored.model_dir, "loss"), one_losses, atol=1e-5)
    one_norms = _scalars(one.model_dir, "gradient_norm")
    assert max(one_norms) > PARAMS["clip_norm"]  # clipping took effect at least once
    np.testing.assert_allclose(_scalars(mirrored.model_dir, "gradient_norm"), one_norms,
                               atol=1e-5)
    for name in ("rnn/basic_lstm_cell/kernel", "stream_state/c", "stream_state/h"):
        np.testing.assert_allclose(mirrored.get_variable_value(name),
                                   one.get_variable_value(name), atol=1e-5)
    assert np.abs(one.get_variable_value("stream_state/h")).min() > 0.0


def _stateful_eval_graph(reset):
    """Runs the EVAL loss twice over one batch; returns the carried state after each run."""
    features = {"x": harness.floats(2, WINDOW, 1), "stream": np.array([0, 1], np.int32),
                "reset": np.array(reset)}
    with tf.Graph().as_default():
        with v1.variable_scope("", initializer=v1.glorot_uniform_initializer(seed=1)):
            spec = model_fns.lstm_model_fn(features, np.zeros([2, WINDOW], np.int64),
                                           tf.estimator.ModeKeys.EVAL, dict(PARAMS, num_streams=2))
        state = [v for v in v1.local_variables() if v.op.name == "eval_stream_state/h"][0]
        with v1.Session() as session:
            session.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
            states = []
            for _ in range(2):
                session.run(spec.loss)
                states.append(session.run(state))
            return states


def test_stream_reset_row_starts_from_zero_state():
    first, second = _stateful_eval_graph(reset=[True, False])
    np.testing.assert_allclose(second[0], first[0], atol=1e-6)  # reset: from zeros again
    assert not np.allclose(second[1], first[1], atol=1e-4)  # carried: from the saved state


@pytest.mark.slow
@pytest.mark.multi_process
def test_stream_state_two_workers_matches_one_device(tmp_path, python_run):
    workers_dir = str(tmp_path / "workers")
    result = python_run(["-m", "estimator_dist.launch", "--workers", "2", "--timeout", "150",
                         "--", sys.executable, "-m", "tests.model_fns.stream_state_job",
                         workers_dir], timeout=180)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    one = _train("default", str(tmp_path / "one"), [(0, STEPS)])
    checkpoint = tf.train.load_checkpoint(workers_dir)
    assert checkpoint.get_tensor("global_step") == STEPS
    for name in ("rnn/basic_lstm_cell/kernel", "stream_state/c", "stream_state/h"):
        np.testing.assert_allclose(checkpoint.get_tensor(name), one.get_variable_value(name),
                                   atol=1e-5)

