"""What each legacy program does under each route: the table the corpus tests and
docs/legacy.md share.

A program either trains and evaluates (``TRAINS``) or stops with one error line that names
the change; ``ERRORS`` holds the pattern that line must match.
"""
TRAINS = "trains"

BEHAVIOURS = ("tf2", "tf1")
STRATEGIES = ("default", "mirrored", "multi_worker")

_GET_NEXT = "get_next"
_QUEUE = "queue"
ERRORS = {
    _GET_NEXT: r"UsageError: input_fn must return a tf\.data\.Dataset under a distribution "
               r"strategy\. .*return the Dataset itself instead of "
               r"make_one_shot_iterator\(dataset\)\.get_next\(\)",
    _QUEUE: r"UsageError: input_fn must return a tf\.data\.Dataset .*use "
            r"input_fns\.numpy_input_fn / input_fns\.pandas_input_fn \(same arguments\)",
    "make_estimator": r"UsageError: strategy 'tpu' needs a TPUEstimator: build it with "
                      r"estimator_dist\.make_estimator\(",
    "keras_3_model": r"ValueError: keras_model must be a tf-keras model for model_to_estimator "
                     r"on TensorFlow 2\.16\+.*TF_USE_LEGACY_KERAS=1",
}

# program -> {strategy: outcome}; a program runs the same under both behaviours.
EXPECTED = {
    "iris_custom_estimator": dict.fromkeys(STRATEGIES, TRAINS),
    "iris_premade_estimator": dict.fromkeys(STRATEGIES, TRAINS),
    "keras_layers_model_fn": dict.fromkeys(STRATEGIES, TRAINS),
    "char_rnn_classifier": dict.fromkeys(STRATEGIES, TRAINS),
    "production_habits": dict.fromkeys(STRATEGIES, TRAINS),
    "warm_start_and_hooks": dict.fromkeys(STRATEGIES, TRAINS),
    "numpy_input_fn_dataset": dict.fromkeys(STRATEGIES, TRAINS),
    "pandas_input_fn_dataset": dict.fromkeys(STRATEGIES, TRAINS),
    "bert_style_tpu": dict.fromkeys(STRATEGIES + ("tpu",), TRAINS),
    "numpy_input_fn_original": {"default": TRAINS, "mirrored": _QUEUE, "multi_worker": _QUEUE},
    "linear_sparse_columns": dict.fromkeys(STRATEGIES, TRAINS),
    "get_next_input_fn": {"default": TRAINS, "mirrored": _GET_NEXT, "multi_worker": _GET_NEXT},
    "finite_input_epochs": dict.fromkeys(STRATEGIES, TRAINS),
    "wide_deep_replace": dict.fromkeys(STRATEGIES, TRAINS),
    "keras_model_to_estimator": dict.fromkeys(STRATEGIES, TRAINS),
    "tpu_estimator_kept": dict.fromkeys(STRATEGIES + ("tpu",), TRAINS),
}
# A plain-Estimator program handed the "tpu" config; the same on a parameter-server cluster.
EXPECTED["iris_custom_estimator"]["tpu"] = "make_estimator"
EXPECTED["iris_custom_estimator"]["parameter_server"] = TRAINS

# On TensorFlow 2.16+ (tf.keras is Keras 3) what differs from the table above, unless
# TF_USE_LEGACY_KERAS=1 makes tf.keras tf-keras again for the whole process.
CURRENT_TF = {"keras_model_to_estimator": dict.fromkeys(STRATEGIES, "keras_3_model")}


def expected(program, strategy, release, environ):
    """``program``'s outcome under ``strategy`` on TensorFlow ``release`` ("2.21")."""
    legacy_keras = environ.get("TF_USE_LEGACY_KERAS", "") in ("1", "true", "True")
    if release != "2.15" and not legacy_keras:
        return CURRENT_TF.get(program, {}).get(strategy, EXPECTED[program][strategy])
    return EXPECTED[program][strategy]


TRAIN_STEPS = 20
# Programs that train until their input ends: the chief's last step, by strategy. Two
# workers read uneven shards (12 and 8 steps an epoch) and stop together after 8.
FINAL_STEPS = {"finite_input_epochs": {"default": 30, "mirrored": 30, "multi_worker": 24}}


def final_step(program, strategy):
    """The step at which ``program`` ends training under ``strategy``."""
    return FINAL_STEPS.get(program, {}).get(strategy, TRAIN_STEPS)


def routes():
    """(program, strategy) pairs of the table, in table order."""
    return [(program, strategy) for program, outcomes in EXPECTED.items()
            for strategy in outcomes]


_LABELS = {
    TRAINS: "trains",
    _GET_NEXT: "error: return the Dataset",
    _QUEUE: "error: use input_fns.numpy_input_fn",
    "make_estimator": "error: use make_estimator",
    "keras_3_model": "error: build the model with tf_keras",
}


def doc_table():
    """The Markdown table docs/legacy.md shows: a row per program, a column per route and
    behaviour ("trains": trains, evaluates, and its checks hold)."""
    columns = [(s, b) for s in STRATEGIES + ("parameter_server", "tpu") for b in BEHAVIOURS]
    header = "| program | " + " | ".join(f"{s} {b}" for s, b in columns) + " |"
    lines = [header, "|" + " --- |" * (len(columns) + 1)]
    for program, outcomes in EXPECTED.items():
        cells = [_LABELS[outcomes[s]] if s in outcomes else "" for s, _ in columns]
        lines.append(f"| `{program}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def current_tf_doc_lines():
    """The Markdown list docs/legacy.md gives of the cells that differ on TF 2.16+."""
    return "\n".join(
        f"- `{program}`: {', '.join(sorted(set(_LABELS[o] for o in outcomes.values())))} "
        f"under {', '.join(outcomes)} (trains with `TF_USE_LEGACY_KERAS=1`)"
        for program, outcomes in CURRENT_TF.items())
