"""A wide-and-deep census model in the shape of tensorflow/models ``official/wide_deep``:
``build_model_columns`` (vocabulary, hashed and crossed columns for the linear part,
embedding and indicator columns for the deep part), a canned
``DNNLinearCombinedClassifier``, and the run config made with
``RunConfig().replace(session_config=tf.ConfigProto(device_count={'GPU': 0}, ...))``, where
the script's ``tf.estimator.RunConfig()`` became the config line."""
import numpy as np
import tensorflow.compat.v1 as tf

from tests.end_to_end.legacy.programs import iris_data

_EDUCATION = ["Bachelors", "HS-grad", "Masters", "Doctorate", "Some-college"]
_OCCUPATIONS = ["Tech-support", "Craft-repair", "Sales", "Exec-managerial", "Farming"]
TRAIN_STEPS = 20
BATCH_SIZE = 16


def build_model_columns():
    """Builds the wide and deep feature columns."""
    age = tf.feature_column.numeric_column("age")
    education_num = tf.feature_column.numeric_column("education_num")
    education = tf.feature_column.categorical_column_with_vocabulary_list("education",
                                                                          _EDUCATION)
    occupation = tf.feature_column.categorical_column_with_hash_bucket("occupation",
                                                                       hash_bucket_size=50)
    age_buckets = tf.feature_column.bucketized_column(age, boundaries=[25, 35, 45, 55])
    wide_columns = [education, occupation, age_buckets,
                    tf.feature_column.crossed_column(["education", "occupation"],
                                                     hash_bucket_size=64),
                    tf.feature_column.crossed_column([age_buckets, "education"],
                                                     hash_bucket_size=64)]
    deep_columns = [age, education_num, tf.feature_column.indicator_column(education),
                    tf.feature_column.embedding_column(occupation, dimension=4)]
    return wide_columns, deep_columns


def _census(count, seed):
    rng = np.random.RandomState(seed)
    education = rng.randint(0, len(_EDUCATION), count)
    age = rng.randint(18, 70, count)
    label = ((education >= 2) ^ (age > 45)).astype(np.int64)
    features = {"age": age.astype(np.float32), "education_num": education.astype(np.float32),
                "education": np.array(_EDUCATION)[education],
                "occupation": np.array(_OCCUPATIONS)[rng.randint(0, 5, count)]}
    return features, label


def input_fn(features, labels, num_epochs, shuffle, batch_size):
    """Generate an input function for the Estimator."""
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    if shuffle:
        dataset = dataset.shuffle(buffer_size=200)
    return dataset.repeat(num_epochs).batch(batch_size)


def build_estimator(make_config, model_dir, inter_op, intra_op):
    """Build an estimator appropriate for the given model type."""
    wide_columns, deep_columns = build_model_columns()
    # Create a tf.estimator.RunConfig to ensure the model is run on CPU, which trains faster
    # than GPU for this model.
    run_config = make_config(model_dir=model_dir, tf_random_seed=1).replace(
        session_config=tf.ConfigProto(device_count={"GPU": 0},
                                      inter_op_parallelism_threads=inter_op,
                                      intra_op_parallelism_threads=intra_op),
        save_checkpoints_steps=10)
    return tf.estimator.DNNLinearCombinedClassifier(
        model_dir=model_dir, linear_feature_columns=wide_columns,
        dnn_feature_columns=deep_columns, dnn_hidden_units=[16, 8], config=run_config)


def main(make_config, model_dir):
    train_x, train_y = _census(256, 0)
    test_x, test_y = _census(64, 1)
    model = build_estimator(make_config, model_dir, inter_op=8, intra_op=2)
    model.train(input_fn=lambda: input_fn(train_x, train_y, None, True, BATCH_SIZE),
                max_steps=TRAIN_STEPS)
    results = model.evaluate(input_fn=lambda: input_fn(test_x, test_y, 1, False, BATCH_SIZE))
    if iris_data.is_chief_task():
        results["predicted"] = [int(p["class_ids"][0]) for p in model.predict(
            input_fn=lambda: input_fn({k: v[:3] for k, v in test_x.items()}, test_y[:3], 1,
                                      False, BATCH_SIZE))]
    return results
