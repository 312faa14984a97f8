"""Serves a SavedModel's tf.Example signatures in a process that imports TensorFlow only.

    python tests/programs/serve_examples.py EXAMPLES_JSON SAVED_MODEL [SAVED_MODEL ...]

EXAMPLES_JSON holds base64 serialized tf.Example strings. Prints one JSON line: for each
SavedModel, each signature's outputs (``predict`` takes ``examples``, the others
``inputs``), and which of ``estimator_dist`` and ``tf_keras`` the process had imported
once it served it.
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


def _served(saved_model, examples):
    outputs = {}
    for name, signature in tf.saved_model.load(saved_model).signatures.items():
        if name != "features":
            key = "examples" if name == "predict" else "inputs"
            outputs[name] = {k: _plain(v) for k, v in signature(**{key: examples}).items()}
    return outputs


def main(examples_path, *saved_models):
    with open(examples_path, encoding="utf-8") as file:
        examples = tf.constant([base64.b64decode(e) for e in json.load(file)])
    outputs, imported = [], []
    for path in saved_models:
        outputs.append(_served(path, examples))
        imported.append([m for m in ("estimator_dist", "tf_keras") if m in sys.modules])
    print(json.dumps({"outputs": outputs, "imported": imported}))


if __name__ == "__main__":
    main(*sys.argv[1:])
