"""The mends, one entry each: what TensorFlow gets wrong, the test that shows it, what the
mend changes, the facts of a strategy that needs it, on which TensorFlow releases, and how
to turn it off.

A mend names no strategy: it says which facts of a strategy's kind make it needed
(``Mend.needs``, the fields of ``distribute.strategy_table.StrategyKind`` that
``StrategyFacts`` lists), so a strategy added to the table gets the mends its facts call
for. Data only: ``registry`` applies the entries, ``releases`` says on which releases.
"""
from __future__ import annotations

import dataclasses
from typing import Protocol

from estimator_dist.mends.releases import CURRENT, OFF_VARIABLE, SUPPORTED

SCOPES = ("import", "process", "strategy", "estimator")
# The needs of a mend that every strategy needs.
ANY: tuple[str, ...] = ()


class StrategyFacts(Protocol):
    """The facts of a strategy's kind that a mend may need (``StrategyKind`` of
    ``distribute.strategy_table``, which says what each means; read here by name)."""

    @property
    def cluster(self) -> bool: ...

    @property
    def synchronous(self) -> bool: ...

    @property
    def loops(self) -> bool: ...

    @property
    def collectives(self) -> bool: ...

    @property
    def mirrored_variables(self) -> bool: ...

    @property
    def tpu(self) -> bool: ...


def _holds(fact: str, kind: StrategyFacts) -> bool:
    """Whether ``fact`` (a fact's name, e.g. "cluster", or "not" and one, "not tpu") holds
    of ``kind``."""
    name = fact.removeprefix("not ")
    return bool(getattr(kind, name)) == (name == fact)


@dataclasses.dataclass(frozen=True)
class Mend:
    """One change to TensorFlow or Estimator behaviour.

    Attributes:
      name: the name ``ESTIMATOR_DIST_MENDS_OFF`` and ``installed()`` use.
      module: where it lives; ``install()`` (process scope) or ``apply(target, ...)``.
      defect: what TF 2.15 does without it, in one sentence.
      test: the test that shows TF's own behaviour (``path::name``).
      changes: what the mend replaces or adds.
      scope: "process" (module attributes of TensorFlow replaced for every caller),
        "strategy" (one strategy object's class) or "estimator" (one Estimator or config).
      needs: the facts of a strategy's kind under which it applies, all of them: a fact
        of ``StrategyFacts`` by name ("cluster") or "not" and one ("not tpu"); ``ANY``
        (none) for every strategy (and for scope "import"); None for a mend applied only
        where its caller asks for it, never by ``install_for``.
      tensorflow: the TensorFlow releases it is checked on and installed on.
      elsewhere: why it is not installed on the other supported releases.
      restores: it puts back a name TensorFlow 2.16 removed (``tf.estimator``, a module
        tensorflow-estimator imports): ``ESTIMATOR_DIST_MENDS_OFF=all`` leaves it on, since
        TensorFlow's own behaviour there is no Estimator at all; naming it turns it off.
    """

    name: str
    module: str
    defect: str
    test: str
    changes: str
    scope: str
    needs: tuple[str, ...] | None
    tensorflow: tuple[str, ...] = SUPPORTED
    elsewhere: str = ""
    restores: bool = False

    @property
    def turn_off(self) -> str:
        return f"{OFF_VARIABLE}={self.name}"

    def needed_by(self, kind: StrategyFacts) -> bool:
        """Whether a strategy of ``kind`` needs it: every fact of ``needs`` holds."""
        return self.needs is not None and all(_holds(fact, kind) for fact in self.needs)


_HAS_ESTIMATOR = "TensorFlow 2.15 ships tf.estimator itself"

MENDS = {mend.name: mend for mend in (
    Mend(
        name="estimator_api_name",
        module="estimator_dist.mends.estimator_api_name",
        defect="tensorflow-estimator's export decorator passes tf_export.ESTIMATOR_API_NAME, "
               "which TensorFlow 2.16 removed: 'import tensorflow_estimator' raises "
               "AttributeError",
        test="tests/estimator_dist/mends/test_current_tf.py::"
             "test_tf_export_has_no_estimator_api_name",
        changes="tf_export.ESTIMATOR_API_NAME and its API_ATTRS / API_ATTRS_V1 rows",
        scope="import", needs=ANY, tensorflow=CURRENT, elsewhere=_HAS_ESTIMATOR,
        restores=True,
    ),
    Mend(
        name="estimator_training",
        module="estimator_dist.mends.estimator_training",
        defect="TensorFlow 2.16 removed tensorflow.python.distribute.estimator_training, which "
               "tensorflow-estimator imports (run_config, estimator, training): 'import "
               "tensorflow_estimator' raises ImportError",
        test="tests/estimator_dist/mends/test_current_tf.py::"
             "test_tf_has_no_estimator_training_module",
        changes="the module again, the package's own: RunConfig's TF_CONFIG set-up and the "
                "distribute-coordinator glue of train_and_evaluate, train and evaluate",
        scope="import", needs=ANY, tensorflow=CURRENT, elsewhere=_HAS_ESTIMATOR,
        restores=True,
    ),
    Mend(
        name="tpu_modules",
        module="estimator_dist.mends.tpu_modules",
        defect="TensorFlow 2.16 removed tensorflow.python.tpu.session_support, tpu_embedding "
               "and tpu_embedding_gradient, which tensorflow-estimator's TPU modules import "
               "when tf.estimator loads",
        test="tests/estimator_dist/mends/test_current_tf.py::test_tf_has_no_tpu_session_support",
        changes="stand-in modules under those names: they import, and any use raises one "
                "line naming the TPU piece (TPU training and TPU embeddings need TF 2.15)",
        scope="import", needs=ANY, tensorflow=CURRENT, elsewhere=_HAS_ESTIMATOR,
        restores=True,
    ),
    Mend(
        name="estimator_keras",
        module="estimator_dist.mends.estimator_keras",
        defect="on TensorFlow 2.16+ tf.keras is Keras 3, and tensorflow-estimator's canned "
               "estimators need Keras 2 (DenseFeatures, optimizers.legacy)",
        test="tests/estimator_dist/mends/test_current_tf.py::"
             "test_keras_3_has_no_dense_features",
        changes="tensorflow-estimator's modules, and only they, see tf.keras as tf-keras (an "
                "import hook on the tensorflow_estimator package); the user's tf.keras stays",
        scope="import", needs=ANY, tensorflow=CURRENT, elsewhere=_HAS_ESTIMATOR,
        restores=True,
    ),
    Mend(
        name="v1_layers",
        module="estimator_dist.mends.v1_layers",
        defect="on TensorFlow 2.16+ with Keras 3, tf.compat.v1.layers and "
               "tf.compat.v1.nn.rnn_cell raise '`dense` is not available with Keras 3.'",
        test="tests/estimator_dist/mends/test_current_tf.py::"
             "test_keras_3_refuses_v1_layers_and_cells",
        changes="tf.compat.v1.layers and tf.compat.v1.nn.rnn_cell bound to tf-keras's legacy "
                "modules (TF_USE_LEGACY_KERAS is not needed, tf.keras stays Keras 3)",
        scope="import", needs=ANY, tensorflow=CURRENT, elsewhere=_HAS_ESTIMATOR,
        restores=True,
    ),
    Mend(
        name="estimator_api",
        module="estimator_dist.mends.estimator_api",
        defect="TensorFlow 2.16 removed tf.estimator and tf.compat.v1.estimator",
        test="tests/estimator_dist/mends/test_current_tf.py::test_tf_has_no_estimator",
        changes="tf.estimator, tf.compat.v2.estimator and tf.compat.v1.estimator (and the "
                "compat modules' own, tf.compat.v2.compat.v1.estimator, ...) bound to "
                "tensorflow-estimator 2.15.0's API modules, unmodified",
        scope="import", needs=ANY, tensorflow=CURRENT, elsewhere=_HAS_ESTIMATOR,
        restores=True,
    ),
    Mend(
        name="python_estimator",
        module="estimator_dist.mends.python_estimator",
        defect="TensorFlow 2.16 removed tensorflow.python.estimator (31 alias modules onto "
               "tensorflow-estimator, which libraries built on Estimator import): 'from "
               "tensorflow.python.estimator import estimator' raises ModuleNotFoundError",
        test="tests/estimator_dist/mends/test_current_tf.py::"
             "test_tf_has_no_python_estimator_package",
        changes="a finder serving TensorFlow 2.15's modules of that package, built as 2.15 "
                "builds them from the unmodified tensorflow-estimator",
        scope="import", needs=ANY, tensorflow=CURRENT, elsewhere=_HAS_ESTIMATOR,
        restores=True,
    ),
    Mend(
        name="keras_3_layer_names",
        module="estimator_dist.mends.keras_3_layer_names",
        defect="Keras 3 numbers unnamed layers per thread for the whole process: a model_fn "
               "calling tf.keras.layers names them dense, dense_1 in the training graph and "
               "dense_2, dense_3 in the evaluation graph, whose checkpoint restore fails",
        test="tests/estimator_dist/mends/test_current_tf.py::"
             "test_keras_3_layers_in_a_model_fn_renamed_between_graphs",
        changes="Estimator._call_model_fn: Keras 3's name counters kept per graph while a "
                "model_fn builds it, as Keras 2 kept them",
        scope="import", needs=ANY, tensorflow=CURRENT,
        elsewhere="Keras 2 (TensorFlow 2.15's tf.keras) numbers layers per graph",
    ),
    Mend(
        name="keras_3_model_to_estimator",
        module="estimator_dist.mends.keras_3_model_to_estimator",
        defect="Keras 3 has no tf.keras.estimator: model_to_estimator stops with an "
               "AttributeError that names neither the cause nor the way out",
        test="tests/estimator_dist/mends/test_current_tf.py::"
             "test_keras_3_has_no_model_to_estimator",
        changes="tf.keras.estimator.model_to_estimator: tf-keras models converted by "
                "tensorflow-estimator, a Keras 3 model refused in one line naming "
                "tf_keras and TF_USE_LEGACY_KERAS=1",
        scope="import", needs=ANY, tensorflow=CURRENT,
        elsewhere="TensorFlow 2.15's tf.keras (Keras 2) has its own",
        restores=True,
    ),
    Mend(
        name="keras_3_feature_layers",
        module="estimator_dist.mends.keras_3_feature_layers",
        defect="Keras 3 has no feature-column layers: tf.keras.layers.DenseFeatures, "
               "tf.compat.v1.keras.layers.DenseFeatures, tf.keras.experimental."
               "SequenceFeatures and LinearModel in a model_fn raise AttributeError",
        test="tests/estimator_dist/mends/test_current_tf.py::"
             "test_keras_3_has_no_feature_column_layers",
        changes="tf-keras's DenseFeatures, SequenceFeatures and LinearModel added to Keras "
                "3's tf.keras.layers and tf.keras.experimental where missing (no name "
                "replaced; tf.keras stays Keras 3)",
        scope="import", needs=ANY, tensorflow=CURRENT,
        elsewhere="TensorFlow 2.15's tf.keras (Keras 2) has them",
    ),
    Mend(
        name="early_stopping",
        module="estimator_dist.mends.early_stopping",
        defect="make_early_stopping_hook takes its multi-worker branch under any strategy: "
               "under 'mirrored' its default run_every_secs raises, and its stop op is a "
               "PerReplica value a Session.run cannot fetch",
        test="tests/estimator_dist/mends/test_early_stopping.py::"
             "test_tf_refuses_the_default_check_interval_under_mirrored",
        changes="tf.estimator.experimental.make_early_stopping_hook (and the v1 and "
                "tensorflow_estimator names) and _MultiWorkerEarlyStoppingHook.begin",
        scope="process",
        needs=("not tpu",),
    ),
    Mend(
        name="cluster_train",
        module="estimator_dist.mends.cluster_train",
        defect="with TF_CONFIG set, Estimator.train refuses to run: 'Only "
               "`STANDALONE_CLIENT` mode is supported when you call `estimator.train`'",
        test="tests/end_to_end/test_end_to_end.py::"
             "test_multi_worker_estimator_train_alone_refused",
        changes="estimator_training.estimator_train: INDEPENDENT_WORKER mode trains through "
                "the distribute coordinator, as train_and_evaluate does; "
                "distribute_coordinator._run_std_server: a later Estimator of the process "
                "with another session_config than the server's is refused in one line "
                "(TensorFlow's coordinator asserts)",
        scope="process",
        needs=("cluster",),
    ),
    Mend(
        name="sparse_gradients",
        module="estimator_dist.mends.sparse_gradients",
        defect="MultiWorkerMirroredStrategy's all-gather of sparse gradients (embedding, "
               "linear and crossed columns, tf.gather) fails with 'Shape mismatch in the "
               "collective instance': in an Estimator graph a collective keeps its instance "
               "key, and the rows' count changes from step to step",
        test="tests/end_to_end/test_end_to_end.py::"
             "test_plain_multi_worker_strategy_fails_on_sparse_gradients",
        changes="the strategy's extended _reduce_to / _batch_reduce_to: IndexedSlices cross "
                "as rows (an optimizer's tables, their row counts and its small dense "
                "gradients packed into one all-gather, each table's rows up to a guess set "
                "from the last step's counts, the rest in a second all-gather, padded to a "
                "fixed ladder of sizes, each size with its own instance key) while rows "
                "x row bytes x replicas stay within the "
                "dense bytes, else dense; tables under 256 KiB made dense on their "
                "gradient's device and all-reduced in one pack with the dense gradients; "
                "sparse_gradients='rows' / 'dense' forces one way",
        scope="strategy",
        needs=("collectives",),
    ),
    Mend(
        name="batch_norm_statistics",
        module="estimator_dist.mends.batch_norm_statistics",
        defect="under MultiWorkerMirroredStrategy the chief's checkpoint save reads ON_READ "
               "MEAN variables (batch norm's moving statistics) in a collective the other "
               "workers never join: the save waits until the collective timeout",
        test="tests/end_to_end/test_end_to_end.py::"
             "test_multi_worker_per_replica_variable_save_stalls_until_watchdog",
        changes="the strategy's scope(): ON_READ MEAN variables are created ON_WRITE "
                "(mirrored, averaged as they are updated)",
        scope="strategy",
        needs=("collectives",),
    ),
    Mend(
        name="divergence_check",
        module="estimator_dist.mends.divergence_check",
        defect="replicas whose copies of a variable are updated apart (a per-replica "
               "assign) drift silently; the checkpoint keeps the first replica's",
        test="tests/estimator_dist/hooks/test_divergence.py::"
             "test_unmended_mirrored_per_replica_assigning_optimizer_trains_on_silently",
        changes="the strategy's extended call_for_each_replica: a DivergenceHook appended "
                "to every Estimator training spec",
        scope="strategy",
        needs=("mirrored_variables",),
    ),
    Mend(
        name="steps_per_run",
        module="estimator_dist.mends.steps_per_run",
        defect="Estimator runs one step per Session.run off TPU: its multi-step loop "
               "(experimental_run_steps_on_iterator) serves TPU strategies only",
        test="tests/estimator_dist/mends/test_steps_per_run.py::"
             "test_tf_estimator_runs_one_step_per_session_run_off_tpu",
        changes="a LoopEstimator's private train path (3 methods of Estimator), replaced on "
                "the instance once Estimator's constructor has checked its members; only for "
                "steps_per_run > 1",
        scope="estimator",
        needs=("loops",),
    ),
    Mend(
        name="tpu_estimator_guard",
        module="estimator_dist.mends.tpu_estimator_guard",
        defect="a plain tf.estimator.Estimator given a TPU RunConfig trains on the host CPU "
               "without a word",
        test="tests/estimator_dist/mends/test_registry.py::"
             "test_tpu_guard_off_plain_estimator_takes_a_tpu_config",
        changes="TPURunConfig.train_distribute looks at its reader's frame and refuses a "
                "plain Estimator",
        scope="estimator",
        needs=("tpu",),
    ),
    Mend(
        name="tpu_validate_logging",
        module="estimator_dist.mends.tpu_validate_logging",
        defect="TPUEstimator on CPU (use_tpu=False) divides log_step_count_steps by "
               "iterations_per_loop as if a Session.run ran that many steps: with the "
               "defaults it writes its examples/s and global_step/s summaries every step",
        test="tests/estimator_dist/mends/test_tpu_validate_logging.py::"
             "test_tf_tpu_estimator_on_cpu_logs_every_step",
        changes="TPURunConfig.log_step_count_steps, read by a TPUEstimator on CPU, is "
                "multiplied by iterations_per_loop",
        scope="estimator",
        needs=("tpu",),
    ),
    Mend(
        name="tpu_estimator_kept",
        module="estimator_dist.mends.tpu_estimator_kept",
        defect="a TPUEstimator(...) constructor given a RunConfig of another strategy stops "
               "with '`config` must be provided with type `tpu_config.RunConfig`'",
        test="tests/estimator_dist/mends/test_tpu_estimator_kept.py::"
             "test_tpu_estimator_plain_run_config_refused_by_tensorflow",
        changes="TPUEstimator.__new__: given a make_run_config config of a tf.distribute "
                "strategy, it returns the Estimator make_estimator builds "
                "(estimator.kept_tpu_estimator, handed to the mend by mends.provide)",
        scope="process",
        needs=("not tpu",),
    ),
    Mend(
        name="custom_gradient_leak",
        module="estimator_dist.mends.custom_gradient_leak",
        defect="graph-mode tf.custom_gradient registers each use's gradient function in "
               "TensorFlow's process-wide registry, which keeps every graph alive: memory "
               "grows with every Estimator train/evaluate call",
        test="tests/estimator_dist/mends/test_custom_gradient_leak.py::"
             "test_tf_custom_gradient_keeps_a_graph_per_estimator_call",
        changes="custom_gradient's graph-mode decorator: the gradient function kept on its "
                "graph, a weakly referring stand-in in the registry, removed with the graph",
        scope="process",
        needs=ANY,
    ),
    Mend(
        name="keras_2_seeds",
        module="estimator_dist.mends.keras_2_seeds",
        defect="under TF2 behaviour a model_fn's tf.compat.v1.layers (Keras 2) draw the seeds "
               "of their default initializers from Python's random module, not from the "
               "RunConfig's tf_random_seed: each process starts from other weights",
        test="tests/estimator_dist/mends/test_keras_2_seeds.py::"
             "test_tf_layers_ignore_tf_random_seed_under_tf2_behaviour",
        changes="Estimator._call_model_fn: while a model_fn runs with tf_random_seed set, "
                "Keras 2's seed generator draws from random.Random(tf_random_seed), put back "
                "after",
        scope="process",
        needs=ANY,
    ),
    Mend(
        name="embedding_rows",
        module="estimator_dist.mends.embedding_rows",
        defect="embedding_lookup_sparse (feature columns' embedding, categorical and crossed "
               "columns) reads each whole table every step once a sparse update has touched "
               "it, a copy (copy-on-read): Grappler's SimplifyEmbeddingLookupStage turns the "
               "gather into a ReadVariableOp, and a distributed variable is converted to a "
               "tensor before any gather",
        test="tests/estimator_dist/mends/test_embedding_rows.py::"
             "test_tf_lookup_reads_the_whole_table_every_step",
        changes="embedding_ops.embedding_lookup (a resource variable's ids through a Snapshot "
                "op, which the rewrite does not see through) and "
                "embedding_ops.embedding_lookup_sparse_impl (a distributed variable's replica "
                "copy looked up): the lookup gathers the rows the batch touches",
        scope="process",
        needs=ANY,
    ),
    Mend(
        name="params_by_mode",
        module="estimator_dist.mends.params_by_mode",
        defect="tf.estimator.Estimator has one params dict for every mode: TPUEstimator's "
               "separate eval_batch_size and predict_batch_size have no place in it",
        test="tests/estimator_dist/mends/test_tpu_estimator_kept.py::"
             "test_make_estimator_batch_sizes_kept_in_deep_copies",
        changes="the Estimator's _call_input_fn and _call_model_fn, on the instance: params "
                "with each mode's per-replica batch_size",
        scope="estimator",
        needs=("not tpu",),
    ),
    Mend(
        name="loss_scaling",
        module="estimator_dist.mends.loss_scaling",
        defect="TF1's float16 graph rewrite needs the optimizer handed to it, which an "
               "Estimator model_fn builds out of reach: small float16 gradients underflow "
               "to zero unless the loss is scaled",
        test="tests/estimator_dist/test_precision.py::"
             "test_float16_gradient_underflows_unless_loss_scaled",
        changes="Estimator._call_model_fn and the v1 Optimizer's compute_gradients / "
                "apply_gradients: a dynamic loss scale while a float16 TRAIN model_fn runs",
        scope="process",
        needs=None,  # Installed when mixed_precision="float16" asks for it.
    ),
    Mend(
        name="collective_watchdog",
        module="estimator_dist.mends.collective_watchdog",
        defect="a collective launched with a timeout holds a thread for the whole timeout: "
               "two multi-worker workers grow about 1,000 threads a second and abort",
        test="tests/estimator_dist/hooks/test_watchdog.py::"
             "test_plain_collective_with_timeout_holds_threads",
        changes="the strategy's collectives lose TensorFlow's per-collective timeout (its "
                "communication options, which its cross-device ops share); the strategy's "
                "extended call_for_each_replica appends a StallWatchdogHook that ends a "
                "stalled task after collective_timeout seconds, naming the peer",
        scope="strategy",
        needs=("collectives",),
    ),
    Mend(
        name="coordination_heartbeat",
        module="estimator_dist.mends.coordination_heartbeat",
        defect="in TF2 behaviour the coordination service MultiWorkerMirroredStrategy starts "
               "aborts every task's collectives when one task's heartbeat is 10 s late: a "
               "worker paused or starved that long ends a healthy cluster",
        test="tests/estimator_dist/hooks/test_watchdog.py::"
             "test_tf_paused_peer_past_the_heartbeat_aborts_the_collectives",
        changes="the eager context's coordination service is configured as the strategy "
                "would, before its first build, with a heartbeat timeout of twice "
                "collective_timeout (TensorFlow's agent heartbeats every half of it), so "
                "that a pause shorter than collective_timeout is survived",
        scope="process",
        needs=None,  # Installed by the multi_worker builder, which knows the cluster.
    ),
    Mend(
        name="input_end",
        module="estimator_dist.mends.input_end",
        defect="under MultiWorkerMirroredStrategy the worker whose finite input ends first "
               "stops, and the others wait in a collective for it forever",
        test="tests/estimator_dist/mends/test_input_end.py::"
             "test_plain_multi_worker_uneven_shards_never_end",
        changes="the strategy's extended _make_input_fn_iterator: elements flagged and the "
                "flags summed across workers each step, so every worker stops after the "
                "same step; its call_for_each_replica: an EndTogetherHook appended to the "
                "training spec",
        scope="strategy",
        needs=("collectives",),
    ),
    Mend(
        name="collective_keys",
        module="estimator_dist.mends.collective_keys",
        defect="every MultiWorkerMirroredStrategy numbers its collectives from the same keys, "
               "and in graph mode (TF1 behaviour) the process's collective executors "
               "remember each key's op: a second Estimator built with a config of its own "
               "fails its first step ('Collective instance 113 expected type 0 ... but got "
               "type 1')",
        test="tests/estimator_dist/mends/test_collective_keys.py::"
             "test_second_config_in_a_process_fails_without_the_mend",
        changes="the strategy class's _collective_key_base before each build: the n-th "
                "strategy of the process starts its group keys at n * 10,000",
        scope="strategy",
        needs=("collectives",),
    ),
    Mend(
        name="collective_instances",
        module="estimator_dist.mends.collective_instances",
        defect="each train call on a cluster numbers its graph's collectives from instance "
               "key 100 again, and the task's server remembers each key's op: a train call "
               "whose graph has other collectives than an earlier one's (another input_fn) "
               "stops at its session's start ('Shape mismatch in the collective instance "
               "173 ... expected shape [4] but another member in the group expected shape "
               "[152]')",
        test="tests/estimator_dist/mends/test_collective_instances.py::"
             "test_second_train_of_another_graph_fails_without_the_mend",
        changes="the strategy's extended _initialize_multi_worker: the CollectiveKeys of the "
                "strategy and of each copy the coordinator configures draw instance keys "
                "from one count per group and device of the process",
        scope="strategy",
        needs=("collectives",),
    ),
    Mend(
        name="evaluator_end",
        module="estimator_dist.mends.evaluator_end",
        defect="train_and_evaluate's evaluator task sleeps out EvalSpec.start_delay_secs "
               "and throttle_secs (defaults 120 s and 600 s) whatever the model dir holds: "
               "after the final checkpoint it waits out the start delay or the throttle "
               "before it evaluates it, and the throttle again before it ends",
        test="tests/estimator_dist/mends/test_evaluator_end.py::"
             "test_tf_evaluator_waits_out_the_throttle_after_the_final_checkpoint",
        changes="_TrainingExecutor._start_continuous_evaluation and _execute_evaluator_once: "
                "TensorFlow's loop whose two sleeps end once the newest checkpoint reaches "
                "TrainSpec.max_steps, or (under the launcher) once training has ended, the "
                "last checkpoint evaluated; its first line and waits over 30 s say what "
                "ends it on stderr",
        scope="process",
        needs=("cluster",),
    ),
    Mend(
        name="bfloat16_all_reduce",
        module="estimator_dist.mends.bfloat16_all_reduce",
        defect="CommunicationOptions has no wire dtype: float32 gradients cross the network "
               "in float32 (applied only when all_reduce_dtype='bfloat16' asks for it)",
        test="tests/estimator_dist/distribute/test_strategies.py::"
             "test_tf_communication_options_have_no_wire_dtype",
        changes="the strategy's extended _batch_reduce_to: float32 values cast to bfloat16 "
                "for the all-reduce and back",
        scope="strategy",
        needs=("collectives",),
    ),
    Mend(
        name="saver_graph_events",
        module="estimator_dist.mends.saver_graph_events",
        defect="CheckpointSaverHook writes the graph and its meta graph into the events file "
               "whenever its session starts: a run that alternates train and evaluate calls "
               "writes the same graph again at every checkpoint interval",
        test="tests/estimator_dist/job/test_checkpoint_saver.py::"
             "test_tf_saver_writes_the_graph_at_every_train_call",
        changes="the train command's CheckpointSaverHook (job/checkpoint_saver.py): its "
                "_summary_writer passes on everything but the graph and the meta graph, and "
                "is flushed when the hook ends; the process's writer writes the graph once",
        scope="estimator",
        needs=("not tpu",),
    ),
)}

NAMES = tuple(MENDS)
