"""Serves a SavedModel's tf.Example signatures in a process that imports TensorFlow only.

    python tests/programs/serve_examples.py SAVED_MODEL EXAMPLES_JSON

EXAMPLES_JSON holds base64 serialized tf.Example strings. Prints one JSON line: each
signature's outputs (``predict`` takes ``examples``, the others ``inputs``), and which of
``estimator_dist`` and ``tf_keras`` the process imported.
"""
import base64
import json
import sys

import numpy as np
import tensorflow as tf


def _plain(value):
    value = value.numpy()
    if value.dtype.kind in "SO":
        return np.vectorize(lambda v: v.decode())(value).tolist()
    return value.tolist()


def main(saved_model, examples_path):
    with open(examples_path, encoding="utf-8") as file:
        examples = tf.constant([base64.b64decode(e) for e in json.load(file)])
    loaded = tf.saved_model.load(saved_model)
    outputs = {}
    for name, signature in loaded.signatures.items():
        if name != "features":
            key = "examples" if name == "predict" else "inputs"
            outputs[name] = {k: _plain(v) for k, v in signature(**{key: examples}).items()}
    print(json.dumps({"outputs": outputs,
                      "imported": [m for m in ("estimator_dist", "tf_keras") if m in sys.modules]}))


if __name__ == "__main__":
    main(*sys.argv[1:])
