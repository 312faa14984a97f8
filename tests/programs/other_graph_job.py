"""A multi-worker task that trains one Estimator twice, the second ``train`` call on
another input_fn, so that its graph has other collectives than the first one's; run as a
module in every task (``TF_CONFIG`` set).

    python -m tests.programs.other_graph_job MODEL_DIR

The first call trains 5 steps on an endless input (``repeat()``), the second 5 more on
one pass over the data, whose end flags (mend ``input_end``) add an all-reduce to each
step before the model's. Prints ``RESULT {"global_step": ...}`` after the second call (the
step of the latest checkpoint: the chief's final one on worker 0), or ``ERROR Type: first
line`` if it raises.
"""
import json
import sys

import tensorflow as tf

import estimator_dist
from tests.programs import tf1_models

_STEPS = 5


def _examples():
    x, y = tf1_models.regression_data()
    return tf.data.Dataset.from_tensor_slices(({"x": x}, (y[:, 0] > 0).astype("int32")))


def main(model_dir):
    config = estimator_dist.make_run_config("multi_worker", model_dir=model_dir,
                                            tf_random_seed=1)
    estimator = tf.compat.v1.estimator.Estimator(tf1_models.iris_style_model_fn, config=config,
                                       params={"learning_rate": 0.1})
    estimator.train(lambda: _examples().repeat().batch(16), steps=_STEPS)
    try:
        estimator.train(lambda: _examples().batch(16), steps=_STEPS)
    except tf.errors.OpError as error:  # The outcome line is the test's evidence.
        print(f"ERROR {type(error).__name__}: {str(error).splitlines()[0]}", flush=True)
        return 1
    step = estimator.get_variable_value("global_step")
    print("RESULT " + json.dumps({"global_step": int(step)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
