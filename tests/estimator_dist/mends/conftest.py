"""Fixtures of the mends' tests."""
import pytest

from estimator_dist.mends import embedding_rows


@pytest.fixture
def embedding_lookups():
    """``use(mended)``: TensorFlow's own embedding lookups (False) or the ``embedding_rows``
    mend's (True) for graphs built next; the mend as it was after the test."""
    was_installed = embedding_rows.installed()

    def use(mended):
        (embedding_rows.install if mended else embedding_rows.uninstall)()

    yield use
    use(was_installed)
