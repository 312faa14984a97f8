"""input_context -> files, records, streams and per-replica batches."""
import pytest

from input_fns import _sharding
from tests.input_fns.util import context


def test_shard_files_whole_files_when_enough_files():
    paths = [f"f{i}" for i in range(5)]
    assert _sharding.shard_files(paths, context(2, 1)) == (["f1", "f3"], False)


def test_shard_files_record_level_when_fewer_files_than_pipelines():
    assert _sharding.shard_files(["a", "b"], context(3, 2)) == (["a", "b"], True)


def test_shard_files_without_context_reads_everything():
    assert _sharding.shard_files(["a", "b"], None) == (["a", "b"], False)


def test_per_replica_batch_size_divides_global_batch():
    assert _sharding.per_replica_batch_size(8, context(1, 0, 4)) == 2
    assert _sharding.per_replica_batch_size(8, None) == 8


def test_stream_layout_gives_each_pipeline_its_own_contiguous_streams():
    # 4 replicas over 2 pipelines, 8 streams: pipeline 1 owns streams 4..7, 2 per replica.
    assert _sharding.stream_layout(8, context(2, 1, 4)) == (4, 2, 2)
    assert _sharding.stream_layout(8, context(2, 0, 4)) == (0, 2, 2)


def test_stream_layout_streams_not_divisible_by_replicas_raises():
    with pytest.raises(ValueError, match=r"num_streams must be divisible by the number of "
                                         r"replicas \(4\).*Received: num_streams=6"):
        _sharding.stream_layout(6, context(1, 0, 4))
