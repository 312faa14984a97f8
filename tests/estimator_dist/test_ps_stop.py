"""A parameter server's word that it stops: written into the model dir, read back with its
words and time; a bucket's model dir is left alone."""
import time

from estimator_dist import ps_stop


def test_announce_read_back_with_its_words_and_time(tmp_path):
    before = time.time()
    assert ps_stop.state(str(tmp_path)) is None
    ps_stop.announce(str(tmp_path), "ps 1 got SIGTERM")
    text = ps_stop.state(str(tmp_path))
    assert ps_stop.words(text) == "ps 1 got SIGTERM"
    assert before <= ps_stop.written_at(text) <= time.time()
    assert ps_stop.told(str(tmp_path), before) == ("ps 1", "SIGTERM")
    assert ps_stop.told(str(tmp_path), time.time() + 1) is None  # Older than the run.


def test_file_of_other_words_or_no_time_tells_nothing(tmp_path):
    (tmp_path / ps_stop.FILE).write_text("garbage")
    assert ps_stop.written_at(ps_stop.state(str(tmp_path))) == 0.0
    assert ps_stop.told(str(tmp_path), 0.0) is None


def test_bucket_model_dir_neither_written_nor_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ps_stop.announce("gs://bucket/run", "ps 0 got SIGTERM")
    assert not list(tmp_path.iterdir())
    assert ps_stop.state("gs://bucket/run") is None and ps_stop.state(None) is None
