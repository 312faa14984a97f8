"""Plain TensorFlow probes run under TF2 or TF1 behaviour; run as a module.

    python -m tests.programs.behaviour_probe BEHAVIOUR PROBE MODEL_DIR

BEHAVIOUR is "tf1" (``disable_v2_behavior()`` first, as legacy scripts do) or "tf2".
PROBE is one of:

* "mirrored_defaults": Estimator + ``MirroredStrategy`` over two logical CPU devices with
  TensorFlow's defaults trains 3 steps; prints ``CROSS_DEVICE_OPS <class>`` (what the
  strategy picked) then ``FINISHED``.
* "seeded_init": a default (one device) ``iris_style_model_fn`` run with
  ``tf_random_seed=1`` trains one step at learning rate 0; prints ``INIT <checksum>`` of
  the initial weights.
"""
import sys

# tf.estimator on TensorFlow 2.16+: the import-scope mends only (nothing on 2.15); no
# other mend is installed without make_run_config.
import estimator_dist  # noqa: F401  (imported for its mends)
import tensorflow as tf

from tests.programs import tf1_models


def mirrored_defaults(model_dir):
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    print("CROSS_DEVICE_OPS", type(strategy.extended._cross_device_ops).__name__,
          flush=True)
    config = tf.estimator.RunConfig(model_dir=model_dir, train_distribute=strategy)
    x, y = tf1_models.regression_data()
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                       params={"learning_rate": 0.1})
    estimator.train(tf1_models.context_input_fn(x, y, 16), max_steps=3)
    print("FINISHED", flush=True)


def seeded_init(model_dir):
    config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=1)
    x, y = tf1_models.classification_data()
    estimator = tf.estimator.Estimator(tf1_models.iris_style_model_fn, config=config,
                                       params={"learning_rate": 0.0})
    estimator.train(tf1_models.dataset_input_fn(x, y, 32), max_steps=1)
    kernels = [estimator.get_variable_value(name) for name in estimator.get_variable_names()
               if name.endswith("kernel")]
    print("INIT", repr(float(sum(abs(k).sum() for k in kernels))), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "tf1":
        tf.compat.v1.disable_v2_behavior()
    {"mirrored_defaults": mirrored_defaults, "seeded_init": seeded_init}[sys.argv[2]](sys.argv[3])
