"""from_csv: columns, shards, static shapes, bad lines."""
import pytest
import tensorflow as tf

import input_fns
from tests.input_fns.util import (assert_disjoint_cover, context, labels_seen,
                                  labels_seen_in_graph, shards)

ROWS = 30
HEADER = "a,b,label\n"


def _write(tmp_path, num_files, rows=ROWS):
    paths = []
    for f in range(num_files):
        lines = "".join(f"{i}.5,{2 * i},{i}\n" for i in range(f, rows, num_files))
        path = tmp_path / f"part-{f}.csv"
        path.write_text(HEADER + lines)
        paths.append(str(path))
    return paths


def _input_fn(paths, **kwargs):
    options = dict(label_column="label", column_dtypes={"label": tf.int64}, batch_size=12,
                   num_epochs=1, drop_remainder=False, seed=5)
    options.update(kwargs)
    return input_fns.from_csv(paths, **options)


@pytest.mark.slow
def test_from_csv_reads_columns_by_header(tmp_path):
    features, labels = next(iter(_input_fn(_write(tmp_path, 1), shuffle=False)()))
    assert labels.numpy().tolist()[:3] == [0, 1, 2]
    assert features["a"].numpy().tolist()[:3] == [0.5, 1.5, 2.5]
    assert features["b"].dtype == tf.float32


@pytest.mark.parametrize("num_files", [1, 3])
@pytest.mark.parametrize("num_pipelines", [1, 2, 3, 4])
@pytest.mark.slow
def test_from_csv_shards_are_disjoint_and_cover_lines(tmp_path, num_files, num_pipelines):
    paths = _write(tmp_path, num_files)
    assert_disjoint_cover(shards(_input_fn(paths), num_pipelines), range(ROWS))


def test_from_csv_per_replica_batch_is_static(tmp_path):
    dataset = _input_fn(_write(tmp_path, 2), num_epochs=None, drop_remainder=True)(
        context(1, 0, 4))
    features, labels = dataset.element_spec
    assert features["a"].shape.as_list() == [3]
    assert labels.shape.as_list() == [3]


@pytest.mark.slow
def test_from_csv_pack_features_stacks_columns_in_file_order(tmp_path):
    input_fn = _input_fn(_write(tmp_path, 1), shuffle=False, pack_features="x")
    features, _ = next(iter(input_fn()))
    assert features["x"].numpy()[:2].tolist() == [[0.5, 0.0], [1.5, 2.0]]


@pytest.mark.slow
def test_from_csv_same_seed_same_order(tmp_path):
    paths = _write(tmp_path, 3)
    assert labels_seen(_input_fn(paths, seed=1)) == labels_seen(_input_fn(paths, seed=1))
    assert labels_seen(_input_fn(paths, seed=1)) != labels_seen(_input_fn(paths, seed=2))


def test_from_csv_missing_column_raises_naming_file(tmp_path):
    paths = _write(tmp_path, 1)
    with pytest.raises(ValueError, match=r"CSV header of .*part-0.csv must list the columns "
                                         r"\['a', 'c', 'label'\].*missing: \['c'\]"):
        _input_fn(paths, column_names=["a", "c", "label"])


def test_from_csv_unknown_label_column_raises(tmp_path):
    with pytest.raises(ValueError, match=r"label_column must be one of the columns "
                                         r"\['a', 'b', 'label'\]. Received: label_column='y'"):
        _input_fn(_write(tmp_path, 1), label_column="y", column_dtypes=None)


def test_from_csv_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"Received: .*absent.csv"):
        _input_fn(str(tmp_path / "absent.csv"))


@pytest.mark.parametrize("line, reason", [
    ("3.5,x,3", r"column b is not a valid float32"),
    ("3.5,6,", r"column label is not a valid int64"),
    ("3.5,6", r"expected 3 fields, found 2"),
], ids=["not_a_number", "empty_field", "too_few_fields"])
@pytest.mark.slow
def test_from_csv_bad_line_raises_naming_file_and_line(tmp_path, line, reason):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + "0.5,0,0\n1.5,2,1\n2.5,4,2\n" + line + "\n4.5,8,4\n")
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"bad CSV record at .*bad.csv line 5: {reason}"):
        labels_seen(_input_fn(str(path), shuffle=False))


@pytest.mark.slow
def test_from_csv_bad_line_in_graph_mode_raises(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + "0.5,0,0\n1.5,x,1\n")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"bad.csv line 3: column b"):
        labels_seen_in_graph(_input_fn(str(path), shuffle=False))


@pytest.mark.slow
def test_from_csv_skip_drops_bad_lines_and_reports_count(tmp_path, capfd):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + "0.5,0,0\nx,2,1\n2.5,4,2\n3.5,6\n4.5,8,4\n")
    assert labels_seen(_input_fn(str(path), shuffle=False, on_error="skip")) == [0, 2, 4]
    err = capfd.readouterr().err
    assert "skipped 1 bad record(s) before" in err and "bad.csv line 4" in err
    assert "skipped 2 bad record(s) in all of" in err


@pytest.mark.slow
def test_from_csv_empty_shard_raises_instead_of_ending(tmp_path):
    paths = _write(tmp_path, 1, rows=1)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"input pipeline 1 of 2 received no records"):
        labels_seen(_input_fn(paths, batch_size=2), context(2, 1))


@pytest.mark.slow
def test_from_csv_quoted_string_with_delimiter_is_one_field(tmp_path):
    path = tmp_path / "quoted.csv"
    path.write_text('name,a,label\n"x, ""y""",1.5,7\nplain,2.5,8\n')
    input_fn = _input_fn(str(path), column_dtypes={"name": tf.string, "label": tf.int64},
                         shuffle=False)
    features, labels = next(iter(input_fn()))
    assert features["name"].numpy().tolist() == [b'x, "y"', b"plain"]
    assert labels.numpy().tolist() == [7, 8]


def test_from_csv_pack_features_with_string_column_raises(tmp_path):
    with pytest.raises(ValueError, match=r"pack_features needs numeric feature columns. "
                                         r"Received: string columns \['a'\]"):
        _input_fn(_write(tmp_path, 1), column_dtypes={"a": tf.string, "label": tf.int64},
                  pack_features="x")
