"""A canned Estimator of a legacy program converts with its config untouched: the
program's module turns TF2 behaviour off at import (``tf.compat.v1.disable_v2_behavior()``),
and ``migrate --estimator`` imports it (Keras 3 builds and saves only eagerly:
``keras_conversion.eagerly``)."""
import json

import numpy as np
import pytest
import tensorflow as tf

from tests.support import run_python

pytestmark = [pytest.mark.slow, pytest.mark.both_ends]


@pytest.mark.timeout(400)
def test_migrate_converts_the_canned_estimator_of_a_tf1_behaviour_program(tmp_path):
    model_dir, output = tmp_path / "model", tmp_path / "keras"
    trained = run_python(["-m", "tests.programs.tf1_canned", str(model_dir)], timeout=180)
    assert trained.returncode == 0, trained.stderr[-3000:]
    migrated = run_python(["-m", "estimator_dist.migrate", "--estimator",
                           "tests.programs.tf1_canned:build_estimator", "--model-dir",
                           str(model_dir), "--output", str(output)],
                          timeout=180, env={"TF1_CANNED_MODEL_DIR": str(model_dir)})
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    assert migrated.stdout.splitlines()[-1] == f"saved       {output}", migrated.stdout
    expected = json.loads((model_dir / "predictions.json").read_text())
    served = tf.saved_model.load(str(output)).signatures["features"](
        **{name: tf.constant(values) for name, values in expected["features"].items()})
    np.testing.assert_allclose(served["predictions"].numpy().ravel(),
                               expected["predictions"], atol=1e-5, rtol=0)
