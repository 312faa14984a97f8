"""One multi-worker task of stateful truncated BPTT; run as a module with TF_CONFIG set.

    python -m tests.model_fns.stream_state_job MODEL_DIR
"""
import sys

import tensorflow as tf

import estimator_dist
from tests.model_fns import test_stream_state as tbptt


def main(model_dir):
    config = estimator_dist.make_run_config("multi_worker", model_dir=model_dir,
                                            collective_timeout=30)
    estimator = tf.estimator.Estimator(tbptt.seeded_lstm_model_fn, config=config,
                                       params=tbptt.PARAMS)
    input_fn = tbptt.streams_input_fn()
    tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(input_fn, max_steps=tbptt.STEPS),
        tf.estimator.EvalSpec(input_fn, steps=1, throttle_secs=1, start_delay_secs=0))
    print("FINISHED")


if __name__ == "__main__":
    main(sys.argv[1])
