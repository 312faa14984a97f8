"""strategies: the reductions the package adds to TensorFlow's strategies."""
import inspect

import tensorflow as tf
from tensorflow.python.distribute import cross_device_ops
from tensorflow.python.distribute import values as values_lib

from estimator_dist.distribute import strategies
from estimator_dist.mends import bfloat16_all_reduce


def _two_replica_strategy():
    strategies.setup_cpu_replicas(2)
    return strategies._MirroredStrategy(
        ["/cpu:0", "/cpu:1"],
        cross_device_ops=tf.distribute.ReductionToOneDevice(reduce_to_device="/cpu:0"))


def test_tf_communication_options_have_no_wire_dtype():
    """What ``bfloat16_all_reduce`` adds: a collective's options set packing, timeout and
    implementation, nothing of the dtype values cross the network in."""
    options = tf.distribute.experimental.CommunicationOptions
    parameters = inspect.signature(options.__init__).parameters
    assert set(parameters) == {"self", "bytes_per_pack", "timeout_seconds", "implementation"}


def test_all_reduce_dtype_bfloat16_sums_in_bfloat16_and_returns_float32():
    """1 + 2^-10 is 1.0 in bfloat16 (8 significant bits): the float32 sum of the two
    replicas' values would be 2.0009765625, the bfloat16 one is 2.0."""
    strategy = _two_replica_strategy()
    bfloat16_all_reduce.apply(strategy)
    values = iter([tf.constant([1.0 + 2**-10]), tf.constant([1.0])])
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda context: next(values))
    reduced, = strategy.extended.batch_reduce_to(
        tf.distribute.ReduceOp.SUM, [(per_replica, "/cpu:0")])
    reduced = strategy.experimental_local_results(reduced)[0]
    assert reduced.dtype == tf.float32
    assert reduced.numpy().tolist() == [2.0]



def _collectives_in_graph(bytes_per_pack):
    """CollectiveReduceV2 ops TF 2.15 builds in a TF1 graph (as Estimator's) for three
    gradients of one worker."""
    graph = tf.Graph()
    with graph.as_default():
        # As MultiWorkerMirroredStrategy hands its CommunicationOptions to each reduction.
        options = tf.distribute.experimental.CommunicationOptions(bytes_per_pack=bytes_per_pack)
        reduce = cross_device_ops.CollectiveAllReduce(devices=["/cpu:0"], group_size=2,
                                                      options=options)
        with tf.device("/cpu:0"):
            gradients = [values_lib.PerReplica((tf.ones(shape),))
                         for shape in ([256, 256], [256], [256, 2])]
        reduce.batch_reduce(tf.distribute.ReduceOp.SUM, [(g, g) for g in gradients], options)
    return [op for op in graph.get_operations() if op.type == "CollectiveReduceV2"]


def test_tf_all_reduce_default_is_one_collective_after_every_gradient():
    """docs/benchmarks.md: by default (bytes_per_pack=0) every gradient goes into one
    concatenated collective, which starts only when the last gradient is ready."""
    collectives = _collectives_in_graph(0)
    assert len(collectives) == 1
    assert collectives[0].inputs[0].op.type == "ConcatV2"


def test_tf_all_reduce_packs_are_unordered_collectives_in_estimator_graphs():
    """docs/benchmarks.md: with bytes_per_pack, each pack is its own collective, with no
    ordering token and no control edge between packs in a TF1 graph, so a pack can start
    as soon as its gradients are ready."""
    collectives = _collectives_in_graph(1)
    assert len(collectives) == 3
    for op in collectives:
        assert not op.control_inputs
        assert not op.get_attr("Nordering_token")
