"""How many tasks one launcher can start on this machine: bounded by this process's open
files and the machine's memory."""
from __future__ import annotations

import os
import resource

# What one local task takes of the machine: open files in the launcher (its port probe and
# output pipe, with room to spare) and memory (a process that has imported TensorFlow holds
# about this much before it trains).
FILES_PER_TASK = 4
MEMORY_PER_TASK = 256 * 2**20


def open_files_allowed() -> int:
    """This process's soft limit on open files (2**20 when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 2**20


def memory() -> int:
    """The machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def max_local_tasks() -> int:
    """How many tasks one launcher can start here: bounded by this process's open files
    and the machine's memory."""
    return max(1, min(open_files_allowed() // FILES_PER_TASK, memory() // MEMORY_PER_TASK))
