"""How many tasks a launcher may start here: the lower of its open files' and the
machine's memory's bound, and at least one."""
from estimator_dist.supervisor import capacity


def test_max_local_tasks_bounded_by_open_files(monkeypatch):
    monkeypatch.setattr(capacity, "open_files_allowed", lambda: 10 * capacity.FILES_PER_TASK)
    monkeypatch.setattr(capacity, "memory", lambda: 1000 * capacity.MEMORY_PER_TASK)
    assert capacity.max_local_tasks() == 10


def test_max_local_tasks_bounded_by_memory(monkeypatch):
    monkeypatch.setattr(capacity, "open_files_allowed", lambda: 1000 * capacity.FILES_PER_TASK)
    monkeypatch.setattr(capacity, "memory", lambda: 7 * capacity.MEMORY_PER_TASK + 1)
    assert capacity.max_local_tasks() == 7


def test_max_local_tasks_at_least_one(monkeypatch):
    monkeypatch.setattr(capacity, "memory", lambda: capacity.MEMORY_PER_TASK // 2)
    assert capacity.max_local_tasks() == 1
