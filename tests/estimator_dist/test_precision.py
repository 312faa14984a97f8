"""Mixed precision (``make_run_config(mixed_precision=...)``, ``--mixed-precision``)."""
import json
import re
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

import estimator_dist
from estimator_dist import precision
from estimator_dist.mends import loss_scaling
from tests.support import run_python, run_pythons
from tests.estimator_dist import precision_job

# Eval losses after the same steps: bfloat16 within 2 % of float32, or within 0.02 where the
# loss is near zero (a relative tolerance there measures noise, not precision).
RELATIVE_TOLERANCE = 0.02
ABSOLUTE_TOLERANCE = 0.02
_ON = rewriter_config_pb2.RewriterConfig.ON
_CLUSTER_TIMEOUT = 300


def _checkpoint_dtypes(model_dir):
    return {str(tf.train.load_variable(model_dir, name).dtype)
            for name, _ in tf.train.list_variables(model_dir)}


def _close(mixed, full):
    return abs(mixed - full) <= max(RELATIVE_TOLERANCE * full, ABSOLUTE_TOLERANCE)


def test_mixed_precision_unknown_name_refused():
    with pytest.raises(estimator_dist.UsageError,
                       match=r"mixed_precision must be None, 'bfloat16' or 'float16'\. "
                             r"Received: mixed_precision='fp16'"):
        estimator_dist.make_run_config(mixed_precision="fp16")


def test_bf16_cpu_features_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512f amx_bf16 avx512_vnni\n")
    assert precision.bf16_cpu_features(str(cpuinfo)) == ("amx_bf16",)
    assert precision.bf16_cpu_features(str(tmp_path / "missing")) == ()


def test_check_device_bfloat16_without_bf16_units_names_the_features():
    with pytest.raises(estimator_dist.UsageError,
                       match=r"needs a CPU with bfloat16 units \(avx512_bf16 or amx_bf16 .*"
                             r"Received: mixed_precision='bfloat16' on a CPU with neither"):
        precision.check_device("bfloat16", gpus=[], cpu_features=())


def test_check_device_bfloat16_on_tpu_needs_no_cpu_units():
    precision.check_device("bfloat16", tpu=True, gpus=[], cpu_features=())


def test_check_device_bfloat16_with_gpus_refused():
    with pytest.raises(estimator_dist.UsageError, match=r"on GPUs use 'float16'.*1 GPU"):
        precision.check_device("bfloat16", gpus=["GPU:0"], cpu_features=("amx_bf16",))


def test_check_device_float16_with_gpus_accepted():
    precision.check_device("float16", gpus=["GPU:0"], cpu_features=())


def test_mixed_precision_float16_without_gpu_refused():
    with pytest.raises(estimator_dist.UsageError,
                       match=r"mixed_precision 'float16' needs a GPU .*Received: "
                             r"mixed_precision='float16' with no GPU visible"):
        estimator_dist.make_run_config(mixed_precision="float16")


def test_mixed_precision_float16_on_tpu_refused():
    with pytest.raises(estimator_dist.UsageError, match=r"with strategy 'tpu'"):
        estimator_dist.make_run_config("tpu", mixed_precision="float16", tpu="my-tpu")


@pytest.mark.skipif(not precision.bf16_cpu_features(), reason="no bfloat16 units on this CPU")
def test_mixed_precision_bfloat16_turns_on_onednn_rewrite_keeping_session_config():
    given = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=3)
    config = estimator_dist.make_run_config(
        "mirrored", num_replicas=2, mixed_precision="bfloat16", session_config=given)
    options = config.session_config.graph_options.rewrite_options
    assert options.auto_mixed_precision_onednn_bfloat16 == _ON
    assert config.session_config.inter_op_parallelism_threads == 3
    assert config.mixed_precision == "bfloat16"
    assert not given.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16


@pytest.mark.skipif(not precision.bf16_cpu_features(), reason="no bfloat16 units on this CPU")
def test_mixed_precision_bfloat16_tpu_validation_rewrites_and_scopes(model_dir):
    config = estimator_dist.make_run_config("tpu", use_tpu=False, model_dir=model_dir,
                                            mixed_precision="bfloat16")
    assert config.session_config.graph_options.rewrite_options.\
        auto_mixed_precision_onednn_bfloat16 == _ON
    seen = {}

    def model_fn(features, labels, mode, params):
        del labels, params  # The model reads x only.
        weights = tf.compat.v1.get_variable("w", [4, 1], dtype=tf.bfloat16)
        seen["dtype"] = weights.dtype
        loss = tf.reduce_mean(tf.cast(tf.cast(features["x"], tf.bfloat16) @ weights,
                                      tf.float32) ** 2)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, tf.compat.v1.train.get_global_step())
        return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn(params):
        x = np.ones([8, 4], np.float32)
        return tf.data.Dataset.from_tensors(({"x": x}, x[:, 0])).repeat().unbatch().batch(
            params["batch_size"], drop_remainder=True)

    estimator_dist.make_estimator(model_fn, config, batch_size=8).train(input_fn, max_steps=2)
    assert seen["dtype"] == tf.bfloat16
    assert tf.train.load_variable(model_dir, "w").dtype == np.float32


@pytest.mark.skipif(not precision.bf16_cpu_features(), reason="no bfloat16 units on this CPU")
@pytest.mark.slow
def test_bfloat16_rewrite_keeps_variables_and_reductions_float32_under_mirrored(model_dir):
    """TensorFlow's oneDNN rewrite computes the matmuls in bfloat16 and leaves the sum of
    the replicas' gradients (AddN), the optimizer update and the checkpoint in float32."""
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir,
                                            mixed_precision="bfloat16", tf_random_seed=1)
    estimator = tf.estimator.Estimator(precision_job.model_fn, config=config, params={
        "hidden_units": [16], "learning_rate": 0.01})
    ops = precision_job.OpDtypesHook()
    estimator.train(lambda: precision_job.input_fn(0, [64], repeat=True), max_steps=3,
                    hooks=[ops])
    dtypes = {op.split(":")[1] for op in ops.counts if "MatMul" in op}
    assert dtypes == {"bfloat16"}
    assert ops.counts["AddN:float32"] and ops.counts["ResourceApplyAdam:float32"]
    assert not any(op.endswith(":bfloat16") for op in ops.counts if "MatMul" not in op)
    assert _checkpoint_dtypes(model_dir) == {"float32", "int64"}


def _float16_loss_scaling(config):
    """What ``mixed_precision="float16"`` does to ``config`` but the GPU rewrite: the
    loss-scale logic, on CPU."""
    config.mixed_precision = "float16"
    loss_scaling.install()


def _scaled_sgd_model_fn(features, labels, mode):
    """loss = w * x: the gradient of w is x, applied by SGD with learning rate 1."""
    del labels  # The loss reads x only.
    weight = tf.compat.v1.get_variable("w", [], initializer=tf.compat.v1.constant_initializer(5.))
    loss = tf.reduce_mean(weight * features["x"])
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(1.0)
    grads_and_vars = optimizer.compute_gradients(loss)
    train_op = optimizer.apply_gradients(grads_and_vars, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


@pytest.mark.parametrize("strategy,replicas", [("default", None), ("mirrored", 2)])
@pytest.mark.slow
def test_float16_loss_scaling_skips_nonfinite_step_and_halves_scale(model_dir, strategy,
                                                                    replicas):
    """The loss scale starts at 2**15. The first step (x = inf) gives an infinite gradient:
    the step is skipped (no update, no global step) and the scale halves. The second
    (x = 2 on every replica) is applied unscaled: w = 5 - 2 = 3."""
    config = estimator_dist.make_run_config(strategy, num_replicas=replicas,
                                            model_dir=model_dir)
    _float16_loss_scaling(config)
    per_step = replicas or 1  # Each replica takes a whole batch of one.
    x = np.array([np.inf] * per_step + [2.0] * 2 * per_step, np.float32)
    estimator = tf.estimator.Estimator(_scaled_sgd_model_fn, config=config)
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, x)).batch(1),
                    max_steps=1)
    assert tf.train.load_variable(model_dir, "global_step") == 1
    assert tf.train.load_variable(model_dir, "w") == pytest.approx(3.0)
    scale = [name for name, _ in tf.train.list_variables(model_dir) if "loss_scale" in name]
    assert scale and tf.train.load_variable(model_dir, scale[0]) == 2.0**14


def _underflow_model_fn(features, labels, mode):
    """A float16 loss (w x)^2 whose gradient 2 w x^2 (9e-9 at w = 5, x = 3e-5) is below
    float16's smallest value (6e-8); the loss's own gradient 2 w x is not."""
    del labels  # The loss reads x only.
    weight = tf.compat.v1.get_variable("w", [], initializer=tf.compat.v1.constant_initializer(5.))
    loss = tf.reduce_mean(tf.square(tf.cast(weight, tf.float16) * tf.cast(features["x"],
                                                                          tf.float16)))
    train_op = tf.compat.v1.train.GradientDescentOptimizer(1e6).minimize(
        loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


@pytest.mark.parametrize("scaled", [False, True])
def test_float16_gradient_underflows_unless_loss_scaled(model_dir, scaled):
    """Plain TensorFlow: the float16 gradient is 0 and w stays 5. Scaled, it is
    representable, and unscaled in float32 it moves w by 1e6 * 9e-9 = 0.009. (The first
    scale, 2**15, overflows the square's gradient 2 * scale: that step is skipped and the
    next runs at 2**14, as dynamic loss scaling is meant to.)"""
    config = estimator_dist.make_run_config(model_dir=model_dir)
    if scaled:
        _float16_loss_scaling(config)
    x = np.full([4], 3e-5, np.float32)
    tf.estimator.Estimator(_underflow_model_fn, config=config).train(
        lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, x)).batch(1), max_steps=1)
    expected = 5.0 - 0.009 if scaled else 5.0
    assert tf.train.load_variable(model_dir, "w") == pytest.approx(expected, abs=3e-4)


def test_float16_loss_scaling_off_for_float32_configs(model_dir):
    loss_scaling.install()
    config = estimator_dist.make_run_config(model_dir=model_dir)
    x = np.array([2.0], np.float32)
    tf.estimator.Estimator(_scaled_sgd_model_fn, config=config).train(
        lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, x)).batch(1), max_steps=1)
    assert not [name for name, _ in tf.train.list_variables(model_dir) if "loss_scale" in name]


def _job_output(stdout, key):
    values = [json.loads(line.split(f"{key} ", 1)[1]) for line in stdout.splitlines()
              if re.match(rf"^(\[worker 0\] )?{key} ", line)]
    assert values, stdout[-3000:]
    return values[0]


def _job_args(tmp_path, strategy, mixed, behaviour, model="layers"):
    args = ["-m", "tests.estimator_dist.precision_job",
            str(tmp_path / f"{model}-{strategy}-{mixed}"), strategy, mixed, behaviour,
            f"model={model}"]
    if strategy == "multi_worker":
        args = ["-m", "estimator_dist.launch", "--workers", "2", "--timeout",
                str(_CLUSTER_TIMEOUT), "--", sys.executable, *args]
    return args


def _check_bfloat16_against_float32(tmp_path, strategy, behaviour, model):
    """The same eval loss after the same steps, read by a float32 Estimator from a float32
    checkpoint; the matmuls ran in bfloat16 and nothing else did. The two runs are
    independent processes (own model dir, own cluster): they run at once."""
    done = run_pythons([_job_args(tmp_path, strategy, mixed, behaviour, model)
                        for mixed in ("float32", "bfloat16")], timeout=_CLUSTER_TIMEOUT + 60)
    for run in done:
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    full, mixed = (run.stdout for run in done)
    assert _close(_job_output(mixed, "LOSS"), _job_output(full, "LOSS"))
    assert _job_output(mixed, "DTYPES") == ["float32", "int64"]
    ops = _job_output(mixed, "OPS")
    assert any(op.endswith("MatMul:bfloat16") for op in ops)
    assert not any(op.endswith(":bfloat16") for op in ops if "MatMul" not in op)


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(900)
@pytest.mark.skipif(not precision.bf16_cpu_features(), reason="no bfloat16 units on this CPU")
@pytest.mark.parametrize("behaviour", ["tf1", "tf2"])
@pytest.mark.parametrize("strategy", ["default", "mirrored", "multi_worker"])
def test_legacy_program_bfloat16_loss_within_tolerance(tmp_path, strategy, behaviour):
    """A tf.layers model_fn, its config line changed only."""
    _check_bfloat16_against_float32(tmp_path, strategy, behaviour, "layers")


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(900)
@pytest.mark.skipif(not precision.bf16_cpu_features(), reason="no bfloat16 units on this CPU")
@pytest.mark.parametrize("strategy", ["default", "mirrored", "multi_worker"])
@pytest.mark.parametrize("model", ["dense", "lstm"])
def test_builtin_model_fn_bfloat16_loss_within_tolerance(tmp_path, model, strategy):
    """TF1 behaviour: there a seeded run repeats, so float32 and bfloat16 start alike (under
    TF2 behaviour two float32 runs of the CLI's LSTM under mirrored ended 0.070 and 0.099)."""
    _check_bfloat16_against_float32(tmp_path, strategy, "tf1", model)


def _train_cli(model_dir, *flags):
    done = run_python(["-m", "estimator_dist.train", "--model-dir", model_dir, "--no-export",
                       *flags], timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout.splitlines()[0]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not precision.bf16_cpu_features(), reason="no bfloat16 units on this CPU")
@pytest.mark.parametrize("model", ["dense", "lstm"])
def test_cli_bfloat16_run_resumes_in_float32_and_migrates(tmp_path, model):
    """The first line names the precision; the model dir of a bfloat16 run resumes in
    float32 and converts with migrate to a float32 Keras model."""
    model_dir = str(tmp_path / "run")
    first = _train_cli(model_dir, "--model", model, "--max-steps", "40",
                       "--mixed-precision", "bfloat16")
    assert first.endswith(f"(strategy default), mixed bfloat16, model dir {model_dir}")
    assert _checkpoint_dtypes(model_dir) == {"float32", "int64"}
    resumed = _train_cli(model_dir, "--max-steps", "60")
    assert resumed.startswith(f"Resuming {model} at step 40 to step 60")
    assert ", float32, model dir" in resumed
    output = str(tmp_path / "keras")
    migrated = run_python(["-m", "estimator_dist.migrate", "--model-dir", model_dir,
                           "--output", output], timeout=300)
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    keras_model = tf.keras.models.load_model(output)
    assert all(weight.dtype == np.float32 for weight in keras_model.get_weights())
