"""docs/facts.md runs: every code block in order, and each claim's verdict holds on TF 2.15
and on TF 2.21.

The blocks are plain TensorFlow (estimator_dist only gives TF 2.16+ tf.estimator back), so
these tests check TensorFlow itself; a TF release that changes one of the facts fails here.
"""
import os
import re

import numpy as np
import pytest

from tests import markdown_blocks
from tests.support import REPO_ROOT

# The page's blocks run in order in one Runner (a module fixture): one worker runs them.
pytestmark = pytest.mark.xdist_group("facts")

_PAGE = os.path.join(REPO_ROOT, "docs", "facts.md")


@pytest.fixture(scope="module")
def facts():
    return markdown_blocks.Runner(_PAGE)


def _claims():
    return [title for title in markdown_blocks.sections(markdown_blocks.read(_PAGE))
            if title != "Setup"]


def test_facts_every_claim_has_a_verdict_and_a_test_here():
    text = markdown_blocks.read(_PAGE)
    bodies = re.split(r"^## ", text, flags=re.M)[2:]  # After the intro and the setup.
    assert len(bodies) == len(_claims()) >= 10
    for body in bodies:
        assert re.search(r"^\*\*(True|False|True only if)\*\*", body.partition("\n\n")[2],
                         re.M), body[:80]
        named = re.findall(r"Checked by `(test_\w+)`", body)
        assert len(named) == 1 and named[0] in globals(), body[:80]


@pytest.mark.slow
def test_input_fn_batch_is_per_replica(facts):
    names = facts.run_to('"The input_fn\'s batch is the global batch"')
    assert [call["batch"] for call in names["calls_ignoring"]] == [16, 16]
    assert [call["batch"] for call in names["calls_using"]] == [8, 8]


@pytest.mark.slow
def test_model_fn_runs_once_per_replica_in_replica_context(facts):
    names = facts.run_to('"You need strategy.run inside a model_fn"')
    assert names["model_fn_contexts"] == [(False, 2), (False, 2)]


@pytest.mark.slow
def test_v1_optimizer_loss_is_scaled_for_you(facts):
    names = facts.run_to('"With v1 optimizers, divide the loss by the number of replicas '
                         'yourself"')
    kernels = names["kernels"]
    np.testing.assert_allclose(kernels["mirrored"], kernels["one_device"], atol=1e-6)
    assert np.abs(kernels["divided"] - kernels["one_device"]).max() > 1e-3


@pytest.mark.slow
def test_lstm_state_needs_no_synchronisation_within_a_step(facts):
    names = facts.run_to('"LSTM state must be synchronised across replicas"')
    one_device, mirrored = names["lstm_kernels"]
    np.testing.assert_allclose(mirrored, one_device, atol=1e-5)


@pytest.mark.slow
def test_replica_local_lstm_state_is_exact_while_streams_stay(facts):
    names = facts.run_to('"Each replica keeping its own LSTM state corrupts the gradients"')
    for single, replicated in zip(names["single"], names["replica_state"]):
        np.testing.assert_allclose(replicated, single, atol=1e-5)
    gap = max(np.abs(s - m).max() for s, m in zip(names["single"], names["moved_streams"]))
    assert gap > 1e-3


@pytest.mark.slow
def test_removed_distribution_apis_are_gone(facts):
    names = facts.run_to('"experimental_run_v2 and multi_gpu_model still exist"')
    assert names["still_there"] == {
        "tf.distribute.Strategy.experimental_run_v2": False,
        "tf.compat.v1.distribute.Strategy.experimental_run_v2": False,
        "tf.keras.utils.multi_gpu_model": False,
        "tf.distribute.Strategy.run": True,
    }


@pytest.mark.slow
def test_tpu_strategy_needs_a_tpu_and_tpu_estimator_runs_on_cpu(facts):
    names = facts.run_to('"TPUStrategy works with Estimator through RunConfig"')
    assert names["no_tpu_error"] == "Please provide a TPU Name to connect to."
    assert names["tpu_estimator"].get_variable_value("global_step") == 2
    assert set(names["tpu_batch_sizes"]) == {32}  # One shard on CPU: the whole batch.


@pytest.mark.slow
@pytest.mark.multi_process
def test_multi_worker_estimator_train_is_refused(facts):
    names = facts.run_to('"MultiWorkerMirroredStrategy works with estimator.train"')
    run = names["worker_run"]
    assert run.returncode == 0, run.stderr[-3000:]
    assert "REFUSED Only `STANDALONE_CLIENT` mode is supported when you call " \
           "`estimator.train`" in run.stdout


@pytest.mark.slow
def test_shard_after_shuffle_needs_a_shared_seed(facts):
    names = facts.run_to('"Shard a dataset before shuffling it, or after — it does not matter"')
    coverage = names["coverage"]
    assert coverage["shard first, own seeds"] == (100, 100)
    assert coverage["shuffle first, shared seed"] == (100, 100)
    distinct, total = coverage["shuffle first, own seeds"]
    assert total == 100 and distinct < 100


def test_logical_cpu_devices_share_one_physical_cpu(facts):
    names = facts.run_to('"MirroredStrategy on CPU speeds training up"')
    assert names["physical_cpus"] == 1
    assert names["logical_cpus"] >= 2
