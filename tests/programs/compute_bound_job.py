"""One worker of a two-worker job whose step is mostly compute: a 512 × 256 batch through
sixteen 256 × 256 layers that share one weight (about 3 GFLOP a step against a 256 KB
gradient), the model where two workers beat one process. Run as a module with TF_CONFIG
set:

    python -m tests.programs.compute_bound_job MODEL_DIR STEPS

Prints ``FINISHED`` after training; the exchange advice (``hooks.exchange_advice``), if
any, goes to stderr.
"""
import sys

import tensorflow as tf

import estimator_dist

BATCH, WIDTH, DEPTH = 512, 256, 16


def model_fn(features, labels, mode):
    del labels  # The loss pulls the output towards zero.
    weight = tf.compat.v1.get_variable("weight", [WIDTH, WIDTH],
                                       initializer=tf.compat.v1.orthogonal_initializer())
    net = features
    for _ in range(DEPTH):
        net = tf.tanh(tf.matmul(net, weight))
    loss = tf.reduce_mean(tf.square(net))
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    features = tf.random.stateless_uniform([BATCH, WIDTH], seed=[1, 2])
    return tf.data.Dataset.from_tensors((features, tf.zeros([BATCH]))).repeat()


def main(model_dir, steps):
    config = estimator_dist.make_run_config("multi_worker", model_dir=model_dir,
                                            collective_timeout=120)
    tf.estimator.Estimator(model_fn, config=config).train(input_fn, max_steps=steps)
    print("FINISHED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
