"""One multi-worker task running a TF1-style model_fn; run as a module with TF_CONFIG set.

    python -m tests.programs.multi_worker_job MODEL_DIR MAX_STEPS HOW [OPTION ...]

HOW is "train_and_evaluate" or "train". Options: "count" adds a per-replica (ON_READ)
variable; "no_peer_hook" leaves out PeerFailureHook; "plain_run_config" builds a plain
tf.estimator.RunConfig with MultiWorkerMirroredStrategy instead of make_run_config's;
"bfloat16_packs" all-reduces in bfloat16, one pack per variable.
"""
import sys

import tensorflow as tf

import estimator_dist
from tests.programs import tf1_models


def main(model_dir, max_steps, how, options=()):
    # Without the hook a long collective timeout leaves only the lost-peer failure path.
    timeout = 600 if "no_peer_hook" in options else 15
    if "plain_run_config" in options:
        config = tf.estimator.RunConfig(
            model_dir=model_dir, train_distribute=tf.distribute.MultiWorkerMirroredStrategy())
    else:
        reduction = ({"all_reduce_dtype": "bfloat16", "all_reduce_bytes_per_pack": 1}
                     if "bfloat16_packs" in options else {})
        config = estimator_dist.make_run_config(
            "multi_worker", model_dir=model_dir, collective_timeout=timeout,
            save_checkpoints_steps=50, tf_random_seed=1, **reduction)
    params = {"learning_rate": 0.01, "count_examples": "count" in options}
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                       params=params)
    x, y = tf1_models.regression_data()
    input_fn = tf1_models.context_input_fn(x, y, global_batch_size=16)
    if how == "train":
        estimator.train(input_fn, max_steps=max_steps)
    else:
        hooks = [] if "no_peer_hook" in options else [estimator_dist.PeerFailureHook()]
        result = tf.estimator.train_and_evaluate(
            estimator, tf.estimator.TrainSpec(input_fn, max_steps=max_steps, hooks=hooks),
            tf.estimator.EvalSpec(input_fn, steps=2, throttle_secs=1, start_delay_secs=0))
        print("RESULT", result)
    print("FINISHED")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:])
