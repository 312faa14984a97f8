"""A Keras model turned into an Estimator, as the TensorFlow tutorial "Create an Estimator
from a Keras model" writes it: a compiled ``Sequential`` model,
``tf.keras.estimator.model_to_estimator(keras_model=..., config=...)``, an input_fn
whose feature dict is keyed by the model's input name, ``train`` then ``evaluate``.

The config line comes first, before the Keras model is built: under TF2 behaviour
building the model runs TensorFlow ops, and "mirrored" (logical CPU devices) and
"multi_worker" (collective ops) must configure the runtime before any op runs."""
import numpy as np
import tensorflow.compat.v1 as tf

TRAIN_STEPS = 20
BATCH_SIZE = 16


def _iris_like(count, seed):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 3, size=count)
    centres = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])
    return (centres[labels] + 0.3 * rng.randn(count, 4)).astype(np.float32), labels


def input_fn(x, y, training):
    dataset = tf.data.Dataset.from_tensor_slices(({"dense_input": x}, y))
    if training:
        dataset = dataset.shuffle(500).repeat()
    return dataset.batch(BATCH_SIZE)


def main(make_config, model_dir):
    config = make_config(model_dir=model_dir, tf_random_seed=1)
    model = tf.keras.models.Sequential([
        tf.keras.layers.Dense(16, activation="relu", input_shape=(4,), name="dense"),
        tf.keras.layers.Dropout(0.2, name="dropout"),
        tf.keras.layers.Dense(3, name="logits"),
    ])
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer="adam")
    keras_estimator = tf.keras.estimator.model_to_estimator(keras_model=model, config=config)
    (train_x, train_y), (test_x, test_y) = _iris_like(120, 0), _iris_like(32, 1)
    keras_estimator.train(input_fn=lambda: input_fn(train_x, train_y, True),
                          max_steps=TRAIN_STEPS)
    return keras_estimator.evaluate(input_fn=lambda: input_fn(test_x, test_y, False))
