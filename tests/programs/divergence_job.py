"""Trains a TF1-style model_fn whose update may bypass the strategy; run as a module.

    python -m tests.programs.divergence_job MODEL_DIR BEHAVIOUR STRATEGY UPDATE STEPS

BEHAVIOUR is "tf1" (``disable_v2_behavior()`` first) or "tf2"; STRATEGY is "mirrored"
(2 replicas) or "multi_worker" (TF_CONFIG set, ``train_and_evaluate``); UPDATE is
"assigning" (an optimizer that assigns new values per replica, as BERT's does),
"aggregated" (the same optimizer after all-reducing the gradients: the fix),
"model_fn_assign" (an assign in the model_fn) or "standard" (a v1 optimizer's minimize).
Prints ``FINISHED`` when training ends.
"""
import sys

import tensorflow.compat.v1 as tf

from tests.programs import tf1_models


class AssigningSGD(tf.train.Optimizer):
    """Plain SGD whose ``apply_gradients`` assigns every variable its new value itself."""

    def __init__(self, learning_rate):
        super().__init__(use_locking=False, name="AssigningSGD")
        self._learning_rate = learning_rate

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        del name  # One op per variable, as in BERT's AdamWeightDecayOptimizer.
        updates = [var.assign(var - self._learning_rate * grad) for grad, var in grads_and_vars]
        if global_step is not None:
            updates.append(global_step.assign_add(1))
        return tf.group(*updates)


def mean_over_replicas(grads, variables):
    """The fix docs/strategies.md shows: every replica gets the mean of all gradients."""

    def reduce(strategy, grads_and_vars):
        return strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.MEAN, grads_and_vars)

    return tf.distribute.get_replica_context().merge_call(
        reduce, args=(list(zip(grads, variables)),))


def model_fn(features, labels, mode, params):
    """Linear regression trained by the update that ``params["update"]`` names."""
    kernel = tf.get_variable("kernel", [tf1_models.NUM_FEATURES, 1],
                             initializer=tf.random_normal_initializer(seed=7))
    loss = tf.losses.mean_squared_error(labels, tf.matmul(features["x"], kernel))
    update, global_step = params["update"], tf.train.get_global_step()
    if update == "standard":
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step)
    elif update == "model_fn_assign":
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step)
        last_mean = tf.get_variable("last_batch_mean", [], trainable=False,
                                    initializer=tf.zeros_initializer())
        train_op = tf.group(train_op, last_mean.assign(tf.reduce_mean(features["x"])))
    else:
        variables = tf.trainable_variables()
        grads = tf.gradients(loss, variables)
        if update == "aggregated":
            grads = mean_over_replicas(grads, variables)
        train_op = AssigningSGD(0.01).apply_gradients(zip(grads, variables), global_step)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(model_dir, behaviour, strategy, update, steps):
    if behaviour == "tf1":
        tf.disable_v2_behavior()
    import estimator_dist
    kwargs = {"collective_timeout": 30} if strategy == "multi_worker" else {"num_replicas": 2}
    config = estimator_dist.make_run_config(strategy, model_dir=model_dir, tf_random_seed=1,
                                            **kwargs)
    estimator = tf.estimator.Estimator(model_fn, config=config, params={"update": update})
    x, y = tf1_models.regression_data()
    input_fn = tf1_models.context_input_fn(x, y, global_batch_size=16)
    tf1_models.train(estimator, input_fn, steps, strategy, eval_steps=1)
    print("FINISHED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
