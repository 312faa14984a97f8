"""Plain TensorFlow's early-stopping hook under MirroredStrategy, without the package's mends.

    python -m tests.programs.early_stopping_probe {secs,steps} MODEL_DIR

Builds an Estimator on a 2-replica MirroredStrategy (logical CPU devices, reduction
through one device) and trains with ``stop_if_no_decrease_hook`` checking every 60
seconds (``secs``, its default) or every 2 steps (``steps``); prints ``ERROR Type:
first line`` or ``FINISHED``.
"""
import sys

# tf.estimator on TensorFlow 2.16+: the import-scope mends only (nothing on 2.15); no
# other mend is installed without make_run_config.
import estimator_dist  # noqa: F401  (imported for its mends)
import tensorflow as tf

from tests.programs import tf1_models


def main(how, model_dir):
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(
        ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())
    session_config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
    config = tf.estimator.RunConfig(model_dir=model_dir, train_distribute=strategy,
                                    session_config=session_config)
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                       params={"learning_rate": 0.01})
    x, y = tf1_models.regression_data()
    timing = {"run_every_secs": None, "run_every_steps": 2} if how == "steps" else {}
    try:
        hook = tf.estimator.experimental.stop_if_no_decrease_hook(estimator, "loss", 100,
                                                                  **timing)
        estimator.train(tf1_models.context_input_fn(x, y, 16), max_steps=6, hooks=[hook])
    except Exception as error:  # Any failure is the probe's result.
        print(f"ERROR {type(error).__name__}: {str(error).strip().splitlines()[0]}")
        return
    print("FINISHED")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
