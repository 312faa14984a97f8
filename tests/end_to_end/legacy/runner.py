"""Runs legacy Estimator programs under a behaviour and a strategy.

    python -m tests.end_to_end.legacy.runner PROGRAM [PROGRAM ...] --behaviour {tf1,tf2} \
        --strategy {default,mirrored,multi_worker,parameter_server,tpu} --model-dir ROOT

PROGRAM names a module of ``tests/end_to_end/legacy/programs``. Each program is written the way
real codebases are and exposes ``main(make_config, model_dir)``; ``make_config`` is the
one line a user changes, ``estimator_dist.make_run_config`` bound to the strategy
("mirrored": 2 replicas; "tpu": TPUEstimator on CPU with a BERT-style script's TPU
arguments, ``use_tpu=False``). For "multi_worker" start this under
``python -m estimator_dist.launch --workers 2 --``, for "parameter_server" add ``--ps 1``.

``--behaviour tf1`` calls ``tf.compat.v1.disable_v2_behavior()`` before anything else, as
legacy scripts do. Programs run one after another in this process, each with its own
model dir ``ROOT/PROGRAM`` and its own outcome line: ``RESULT PROGRAM {json}`` with what
``main`` returned, or ``ERROR PROGRAM Type: message`` (the first line of the exception).
A program that never reports has no outcome line, so a crash or a hang fails every
program not yet reported. Exits 1 if any program failed.
"""
import argparse
import functools
import importlib
import json
import os
import sys
import traceback

BEHAVIOURS = ("tf1", "tf2")
STRATEGIES = ("default", "mirrored", "multi_worker", "parameter_server", "tpu")


def _strategy_args(strategy, tf):
    """The arguments of the config line besides what each program passes."""
    if strategy == "mirrored":
        return {"num_replicas": 2}
    if strategy != "tpu":
        return {}
    # What a BERT-style script hands tf.compat.v1.estimator.tpu.RunConfig, on CPU.
    tpu = tf.compat.v1.estimator.tpu
    return {"use_tpu": False, "cluster": None, "master": None,
            "tpu_config": tpu.TPUConfig(
                iterations_per_loop=10,
                per_host_input_for_training=tpu.InputPipelineConfig.PER_HOST_V2)}


def _parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="+")
    parser.add_argument("--behaviour", choices=BEHAVIOURS, required=True)
    parser.add_argument("--strategy", choices=STRATEGIES, required=True)
    parser.add_argument("--model-dir", required=True)
    return parser


def _json_ready(value):
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    return value.item() if hasattr(value, "item") else value


def _run(name, make_config, model_dir):
    try:
        program = importlib.import_module(f"tests.end_to_end.legacy.programs.{name}")
        result = program.main(make_config, os.path.join(model_dir, name))
    except Exception as error:  # Any failure is the program's result.
        traceback.print_exc()  # For the log; the outcome line is the first line.
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        print(f"ERROR {name} {type(error).__name__}: {first}", flush=True)
        return False
    print(f"RESULT {name} " + json.dumps(_json_ready(result or {})), flush=True)
    return True


def main(argv=None):
    args = _parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # Late: loads TensorFlow.
    if args.behaviour == "tf1":
        tf.compat.v1.disable_v2_behavior()
    import estimator_dist
    make_config = functools.partial(estimator_dist.make_run_config, args.strategy,
                                    **_strategy_args(args.strategy, tf))
    outcomes = [_run(name, make_config, args.model_dir) for name in args.programs]
    return 0 if all(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
