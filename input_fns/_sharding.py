"""``input_context`` -> shard and per-replica batch size, in one place."""


def per_replica_batch_size(batch_size, input_context):
    """The batch each replica receives for a global ``batch_size``."""
    if input_context is None:
        return batch_size
    return input_context.get_per_replica_batch_size(batch_size)


def shard(dataset, input_context):
    """The part of ``dataset`` that this input pipeline reads (all of it without a context)."""
    if input_context is None or input_context.num_input_pipelines == 1:
        return dataset
    return dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
