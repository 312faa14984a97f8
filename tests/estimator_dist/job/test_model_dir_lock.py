"""The model dir's lock (``model_dir_lock``): one run per model dir, stale locks taken over."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from estimator_dist.job import model_dir_lock
from estimator_dist.errors import UsageError


def _write_lock(model_dir, *, host=None, pid=None, age=0.0, text=None):
    """A lock as another run would leave it; ``age``: seconds since its last heartbeat."""
    lock = model_dir_lock.path(str(model_dir))
    if text is None:
        text = json.dumps({"host": host or socket.gethostname(), "pid": pid or os.getpid(),
                           "started": "2024-01-01T00:00:00+00:00", "token": "other"})
    with open(lock, "w", encoding="utf-8") as file:
        file.write(text)
    stamp = time.time() - age
    os.utime(lock, (stamp, stamp))
    return lock


def _dead_pid():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, timeout=60, check=True)
    return int(done.stdout)


def test_hold_writes_host_pid_and_start_and_release_removes_it(tmp_path):
    held = model_dir_lock.hold(str(tmp_path))
    fields = json.loads((tmp_path / model_dir_lock.FILENAME).read_text())
    assert fields["host"] == socket.gethostname() and fields["pid"] == os.getpid()
    assert fields["started"].endswith("+00:00")
    held.release()
    held.release()  # Idempotent.
    assert os.listdir(tmp_path) == []


def test_hold_live_lock_refused_naming_the_holder(tmp_path):
    with model_dir_lock.hold(str(tmp_path)):
        with pytest.raises(UsageError, match=rf"model_dir must not be in use by another run "
                                             rf".*Received: model_dir=.* held by pid "
                                             rf"{os.getpid()} on host '.*', running since "):
            model_dir_lock.hold(str(tmp_path))
        with pytest.raises(UsageError, match="must not be in use"):
            model_dir_lock.check_free(str(tmp_path))
    assert not os.path.exists(model_dir_lock.path(str(tmp_path)))


def test_hold_lock_of_dead_process_on_this_host_taken_over(tmp_path):
    _write_lock(tmp_path, pid=_dead_pid())
    model_dir_lock.check_free(str(tmp_path))
    with model_dir_lock.hold(str(tmp_path)) as held:
        fields = json.loads((tmp_path / model_dir_lock.FILENAME).read_text())
        assert fields["token"] == held.holder.token != "other"
    assert os.listdir(tmp_path) == []


def test_hold_other_host_lock_live_until_its_heartbeat_is_old(tmp_path):
    _write_lock(tmp_path, host="elsewhere.invalid", pid=1,
                age=model_dir_lock.STALE_SECONDS - 60)
    with pytest.raises(UsageError, match=r"held by pid 1 on host 'elsewhere\.invalid'"):
        model_dir_lock.hold(str(tmp_path))
    _write_lock(tmp_path, host="elsewhere.invalid", pid=1,
                age=model_dir_lock.STALE_SECONDS + 60)
    model_dir_lock.hold(str(tmp_path)).release()


def test_hold_unparseable_fresh_lock_refused(tmp_path):
    _write_lock(tmp_path, text="")
    with pytest.raises(UsageError, match="held by a run whose lock does not parse"):
        model_dir_lock.hold(str(tmp_path))


def test_heartbeat_refreshes_the_lock_mtime(tmp_path, monkeypatch):
    monkeypatch.setattr(model_dir_lock, "HEARTBEAT_SECONDS", 0.05)
    with model_dir_lock.hold(str(tmp_path)) as held:
        os.utime(held.path, (1.0, 1.0))
        deadline = time.monotonic() + 10
        while os.stat(held.path).st_mtime < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.stat(held.path).st_mtime > time.time() - 60


def test_take_over_puts_back_a_lock_that_is_no_longer_the_stale_one(tmp_path):
    lock = _write_lock(tmp_path, pid=_dead_pid())
    judged = model_dir_lock._read(lock)
    _write_lock(tmp_path)  # Another run took it over in between: live.
    assert not model_dir_lock._take_over(lock, judged)
    assert json.loads(open(lock, encoding="utf-8").read())["pid"] == os.getpid()
    assert os.listdir(tmp_path) == [model_dir_lock.FILENAME]


def test_release_leaves_a_lock_that_is_not_its_own(tmp_path):
    held = model_dir_lock.hold(str(tmp_path))
    os.remove(held.path)
    _write_lock(tmp_path, host="elsewhere.invalid")
    held.release()
    assert os.path.exists(held.path)


def test_check_free_on_a_new_path_passes(tmp_path):
    model_dir_lock.check_free(str(tmp_path / "new"))
    (tmp_path / "file").write_text("x")
    model_dir_lock.check_free(str(tmp_path / "file"))
