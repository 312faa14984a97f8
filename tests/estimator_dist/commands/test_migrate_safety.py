"""``estimator_dist.migrate`` writes only what it creates.

Whatever ``--output`` names (the model dir, a directory holding it, a path through a
symlink into it, any existing file or directory migrate did not write), migrate refuses in
one line with exit code 2 and leaves every byte as it was; ``--overwrite`` replaces only
an earlier migrate output.
"""
import io
import os

import pytest
import tensorflow as tf

from estimator_dist.commands import migrate
from estimator_dist.job import training
from estimator_dist.job.settings import RunSettings
from estimator_dist.conversion import keras_conversion
from tests.estimator_dist.train_support import keep_tf_logging, snapshot  # noqa: F401

pytestmark = pytest.mark.usefixtures("keep_tf_logging")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A ``runs`` directory holding two trained model dirs, ``a`` and ``b``."""
    root = tmp_path_factory.mktemp("runs")
    for name in ("a", "b"):
        training.run(RunSettings(model="dense", params={"hidden_units": [4]}, max_steps=2,
                                 model_dir=str(root / name), export=False),
                     stream=io.StringIO())
    return root


def _refused(argv, capsys, *, protected):
    """Runs migrate; asserts exit 2, one line on stderr and ``protected`` unchanged."""
    before = snapshot(protected)
    code = migrate.main([str(a) for a in argv])
    error = capsys.readouterr().err
    assert code == 2
    assert len(error.splitlines()) == 1 and "Traceback" not in error
    assert snapshot(protected) == before
    return error


@pytest.mark.slow
def test_migrate_output_parent_of_model_dir_with_overwrite_exits_2(runs, capsys):
    error = _refused(["--model-dir", runs / "a", "--output", runs, "--overwrite"], capsys,
                     protected=runs)
    assert "output must be outside model_dir and must not contain it" in error
    assert sorted(os.listdir(runs)) == ["a", "b"]


def test_migrate_output_equal_to_model_dir_with_overwrite_exits_2(runs, capsys):
    error = _refused(["--model-dir", runs / "a", "--output", runs / "a", "--overwrite"], capsys,
                     protected=runs)
    assert "output must be outside model_dir" in error


def test_migrate_output_through_symlink_into_model_dir_exits_2(runs, tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(runs / "a")
    error = _refused(["--model-dir", runs / "a", "--output", link / "keras"], capsys,
                     protected=runs)
    assert f"Received: output={str(runs / 'a' / 'keras')!r}" in error


def test_migrate_output_symlink_to_model_dir_with_overwrite_exits_2(runs, tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(runs / "a")
    _refused(["--model-dir", runs / "a", "--output", link, "--overwrite"], capsys,
             protected=runs)
    assert link.is_symlink()


def test_migrate_model_dir_through_symlink_output_inside_exits_2(runs, tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(runs / "a")
    _refused(["--model-dir", link, "--output", runs / "a" / "keras"], capsys, protected=runs)


def test_migrate_existing_directory_with_overwrite_exits_2(runs, tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    error = _refused(["--model-dir", runs / "a", "--output", other, "--overwrite"], capsys,
                     protected=tmp_path)
    assert "output must be a new path or an earlier migrate output" in error


@pytest.mark.parametrize("name", ["model.keras", "notes.txt"])
def test_migrate_existing_file_with_overwrite_exits_2(runs, tmp_path, capsys, name):
    (tmp_path / name).write_text("keep me")
    _refused(["--model-dir", runs / "a", "--output", tmp_path / name, "--overwrite"], capsys,
             protected=tmp_path)


@pytest.mark.slow
def test_migrate_earlier_output_without_overwrite_exits_2(runs, tmp_path, capsys):
    output = tmp_path / "keras"
    assert migrate.main(["--model-dir", str(runs / "a"), "--output", str(output)]) == 0
    error = _refused(["--model-dir", runs / "a", "--output", output], capsys,
                     protected=tmp_path)
    assert "pass --overwrite to replace it" in error


@pytest.mark.parametrize("name", ["keras", "model.keras"])
@pytest.mark.slow
def test_migrate_overwrite_replaces_an_earlier_output(runs, tmp_path, capsys, name):
    output = str(tmp_path / name)
    before = snapshot(runs)
    assert migrate.main(["--model-dir", str(runs / "a"), "--output", output]) == 0
    assert migrate.main(["--model-dir", str(runs / "b"), "--output", output,
                         "--overwrite"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"saved       {output}"
    assert snapshot(runs) == before
    assert os.listdir(tmp_path) == [name]
    assert tf.keras.models.load_model(output).output_names == ["logits"]


@pytest.mark.parametrize("manifest", [True, False], ids=["manifest", "marker-without-list"])
def test_migrate_overwrite_refuses_an_earlier_output_holding_a_users_file(runs, tmp_path,
                                                                          capsys, manifest):
    output = tmp_path / "keras"
    assert migrate.main(["--model-dir", str(runs / "a"), "--output", str(output)]) == 0
    if not manifest:  # As an output written before the marker listed its files.
        (output / keras_conversion.MARKER).write_text('{"written_by": "migrate"}')
    (output / "variables" / "notes.txt").write_text("mine\n")
    error = _refused(["--model-dir", runs / "b", "--output", output, "--overwrite"], capsys,
                     protected=tmp_path)
    assert ("output must hold only the files an earlier migrate wrote there to be replaced "
            "(--overwrite removes nothing else; move them out first). Received: output="
            f"'{output}' also holding 'variables/notes.txt'") in error
    assert (output / "variables" / "notes.txt").read_text() == "mine\n"


def test_migrate_cli_output_parent_of_model_dir_exits_2(runs, python_run):
    before = snapshot(runs)
    result = python_run(["-m", "estimator_dist.migrate", "--model-dir", str(runs / "a"),
                         "--output", str(runs), "--overwrite"], timeout=120)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert snapshot(runs) == before
