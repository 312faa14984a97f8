"""The model dir's lock (``model_dir_lock``): one run per model dir, stale locks taken over,
live ones never; anything else at the lock's path named in one line."""
import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from estimator_dist import process_exit
from estimator_dist.job import model_dir_lock
from estimator_dist.errors import UsageError
from tests.support import run_python


def _write_lock(model_dir, *, host=None, pid=None, age=0.0, text=None, **fields):
    """A lock as another run would leave it; ``age``: seconds since its last heartbeat
    (negative: ahead of the clock); ``fields``: more of its fields."""
    lock = model_dir_lock.path(str(model_dir))
    if text is None:
        text = json.dumps({"host": host or socket.gethostname(), "pid": pid or os.getpid(),
                           "started": "2024-01-01T00:00:00+00:00", "token": "other", **fields})
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


@pytest.fixture
def paused():
    """A live process of this host, stopped (SIGSTOP) as a paused holder would be."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    os.kill(process.pid, signal.SIGSTOP)
    yield process
    process.kill()
    process.wait(timeout=60)


@pytest.mark.timeout(60)
def test_hold_paused_holder_on_this_host_keeps_its_lock_whatever_its_heartbeat(tmp_path,
                                                                                 paused):
    _write_lock(tmp_path, pid=paused.pid, process=model_dir_lock.process_start(paused.pid),
                age=model_dir_lock.STALE_SECONDS + 10)
    for attempt in (model_dir_lock.hold, model_dir_lock.check_free):
        with pytest.raises(UsageError, match=rf"must not be in use .* held by pid {paused.pid} "):
            attempt(str(tmp_path))
    _write_lock(tmp_path, pid=paused.pid, age=10 * model_dir_lock.STALE_SECONDS)  # An older
    with pytest.raises(UsageError, match=rf"held by pid {paused.pid} "):  # lock: no start.
        model_dir_lock.hold(str(tmp_path))


@pytest.mark.timeout(60)
def test_process_start_tells_processes_apart(paused):
    mine, theirs = model_dir_lock.process_start(os.getpid()), \
        model_dir_lock.process_start(paused.pid)
    assert mine and theirs and mine != theirs
    assert model_dir_lock.process_start(os.getpid()) == mine
    assert model_dir_lock.process_start(_dead_pid()) is None


@pytest.mark.timeout(60)
def test_hold_lock_whose_pid_is_another_process_now_taken_over(tmp_path, paused):
    _write_lock(tmp_path, pid=paused.pid, process="another-boot/12345")  # A reused pid.
    with model_dir_lock.hold(str(tmp_path)) as held:
        assert json.loads(open(held.path, encoding="utf-8").read())["process"] == \
            model_dir_lock.process_start(os.getpid())


def test_hold_other_host_heartbeat_judged_by_the_file_system_clock(tmp_path, monkeypatch):
    _write_lock(tmp_path, host="elsewhere.invalid", pid=1, age=10)
    real = time.time
    monkeypatch.setattr(model_dir_lock.time, "time", lambda: real() + 3600)  # This host's
    with pytest.raises(UsageError, match="must not be in use"):  # clock an hour ahead.
        model_dir_lock.hold(str(tmp_path))


def test_hold_other_host_heartbeat_from_the_future_refused_naming_the_skew(tmp_path):
    _write_lock(tmp_path, host="elsewhere.invalid", pid=1,
                age=-(model_dir_lock.SKEW_SECONDS - 20))  # Within the skew: live.
    with pytest.raises(UsageError, match="must not be in use"):
        model_dir_lock.hold(str(tmp_path))
    _write_lock(tmp_path, host="elsewhere.invalid", pid=1, age=-86_400)
    for attempt in (model_dir_lock.hold, model_dir_lock.check_free):
        with pytest.raises(UsageError, match=(
                r"model_dir's lock must have a heartbeat at most 60 s ahead of the file "
                r"system's clock to be judged \(the clocks of host 'elsewhere\.invalid' and "
                r"the file system disagree\); remove it if no run is using '.*'\. Received: "
                r"'.*\.estimator-dist\.lock' of pid 1 on host 'elsewhere\.invalid', .*, its "
                r"heartbeat 864\d\d s ahead")):
            attempt(str(tmp_path))


def _fifo(lock):
    os.mkfifo(lock)


def _dangling(lock):
    os.symlink("gone", lock)


def _directory(lock):
    os.mkdir(lock)


def _text(text):
    def write(lock):
        with open(lock, "w", encoding="utf-8") as file:
            file.write(text)
    return write


def _lock_text(**changes):
    return _text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                             "started": "2024-01-01T00:00:00+00:00", "token": "t", **changes}))


@pytest.mark.parametrize("make, problem", [
    (_fifo, "it is a FIFO"),
    (_dangling, "it is a symlink to 'gone'"),
    (_directory, "it is a directory"),
    (_text(""), "it is empty"),
    (_text("garbage{"), "it does not parse as a lock"),
    (_text('{"pid": 1}'), "it does not parse as a lock"),
    (_lock_text(pid=0), "its pid 0 names no process"),
    (_lock_text(pid=-1), "its pid -1 names no process"),
    (_lock_text(pid=2**70), f"its pid {2**70} names no process"),
    (_lock_text(pid="12"), "its pid '12' names no process"),
    (_lock_text(host=""), "it does not parse as a lock"),
    (_text(" " * 5000), "it holds more than 4096 bytes"),
], ids=["fifo", "dangling-symlink", "directory", "empty", "garbage", "fields-missing",
        "pid-0", "pid-minus-1", "pid-overflow", "pid-string", "host-empty", "too-large"])
def test_anything_but_a_lock_of_ours_named_in_one_line_and_left(tmp_path, make, problem):
    lock = model_dir_lock.path(str(tmp_path))
    make(lock)
    message = (rf"^model_dir's lock must be a lock file estimator_dist\.train wrote; remove it "
               rf"if no run is using '{tmp_path}'\. Received: '{lock}': {re.escape(problem)}$")
    start = time.monotonic()
    for attempt in (model_dir_lock.hold, model_dir_lock.check_free):
        with pytest.raises(UsageError, match=message):
            attempt(str(tmp_path))
    assert time.monotonic() - start < 5
    assert os.path.lexists(lock) and sorted(os.listdir(tmp_path)) == [model_dir_lock.FILENAME]


class _FullDisk:
    """A file whose writes fail as on a full disk."""

    def __init__(self, file):
        self.file = file

    def write(self, _):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.file.close()


@pytest.mark.parametrize("links", [True, False], ids=["link", "exclusive-create"])
def test_failed_write_leaves_no_temporary_file_and_no_lock(tmp_path, monkeypatch, links):
    real_fdopen, writes = os.fdopen, []

    def fdopen(descriptor, mode="r", **kwargs):
        file = real_fdopen(descriptor, mode, **kwargs)
        writes.extend([mode] if "w" in mode else [])
        # The staged file's write fails; where links are not allowed, the lock's own.
        return _FullDisk(file) if len(writes) == (1 if links else 2) else file

    monkeypatch.setattr(os, "fdopen", fdopen)
    if not links:
        monkeypatch.setattr(os, "link", lambda *_: (_ for _ in ()).throw(
            OSError(errno.EPERM, os.strerror(errno.EPERM))))
    with pytest.raises(OSError, match="No space left on device"):
        model_dir_lock.hold(str(tmp_path))
    assert os.listdir(tmp_path) == []


@pytest.mark.timeout(60)
def test_hard_exit_releases_the_lock(tmp_path):
    code = ("from estimator_dist import process_exit\n"
            "from estimator_dist.job import model_dir_lock\n"
            f"model_dir_lock.hold({str(tmp_path)!r})\n"
            "process_exit.end(3, 'guard: why')\n")
    result = run_python(["-c", code], timeout=30)
    assert (result.returncode, result.stderr) == (3, "guard: why\n")
    assert os.listdir(tmp_path) == []


def test_release_takes_itself_off_the_hard_exit(tmp_path, monkeypatch):
    cleanups = []
    monkeypatch.setattr(process_exit, "_cleanups", cleanups)
    held = model_dir_lock.hold(str(tmp_path))
    assert cleanups == [held.release]
    held.release()
    assert cleanups == []


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
