"""strategies: the reductions the package adds to TensorFlow's strategies."""
import tensorflow as tf

from estimator_dist import _extended, strategies


def _two_replica_strategy():
    strategies.setup_cpu_replicas(2)
    return strategies._MirroredStrategy(  # pylint: disable=protected-access
        ["/cpu:0", "/cpu:1"],
        cross_device_ops=tf.distribute.ReductionToOneDevice(reduce_to_device="/cpu:0"))


def test_all_reduce_dtype_bfloat16_sums_in_bfloat16_and_returns_float32():
    """1 + 2^-10 is 1.0 in bfloat16 (8 significant bits): the float32 sum of the two
    replicas' values would be 2.0009765625, the bfloat16 one is 2.0."""
    strategy = _two_replica_strategy()
    mixin = strategies._reduction_mixin("bfloat16")  # pylint: disable=protected-access
    _extended.add_mixin(strategy, mixin)
    values = iter([tf.constant([1.0 + 2**-10]), tf.constant([1.0])])
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda context: next(values))
    reduced, = strategy.extended.batch_reduce_to(
        tf.distribute.ReduceOp.SUM, [(per_replica, "/cpu:0")])
    reduced = strategy.experimental_local_results(reduced)[0]
    assert reduced.dtype == tf.float32
    assert reduced.numpy().tolist() == [2.0]

