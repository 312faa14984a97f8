"""The suite's temporary files stay in its run's directory, not in the machine's.

TensorFlow and the programs the tests run write where ``tempfile`` and ``TMPDIR`` say: an
Estimator built without a model_dir trains in a new directory there ("Using temporary
folder as model directory"), autograph writes a module for each function it converts
(removed as its process exits, which a process ended by a signal does not do), the
legacy programs write their data. Every process of a run -- pytest, each of its workers,
and the processes they start, which inherit ``TMPDIR`` -- writes them in ``tmp`` of its
base temporary directory (``tmp_path_factory``'s, the tests' ``tmp_path`` beside it),
which pytest removes three runs later. A run of the README's command left 41 entries
(29 MiB) in ``/tmp`` before.
"""
import tempfile

import pytest


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_in_the_run(tmp_path_factory):
    """Points ``tempfile`` and ``TMPDIR`` at the run's ``tmp`` for the whole session."""
    directory = str(tmp_path_factory.mktemp("tmp", numbered=False))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", directory)
        patch.setattr(tempfile, "tempdir", directory)
        yield directory
