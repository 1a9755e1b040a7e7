"""Per-run temporary directories that never outlive their owner for long.

Each run gets `/tmp/sao-sandbox-*` and removes it when it ends. A caller killed with SIGKILL
cannot remove anything, so every directory carries an `owner` file naming the creating process
(pid and kernel start time, so a reused pid is not mistaken for the owner), and the first run of
each later process sweeps away every directory whose owner is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

PREFIX = "sao-sandbox-"
OWNER_FILE = "owner"
# A directory is created a moment before its owner file is written; one without an owner file
# that is older than this was left by a process killed in between.
_UNOWNED_GRACE_S = 60.0

_swept = False
_sweep_lock = threading.Lock()


def _start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks after boot); None if no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and brackets; fields after its last ')' are
    # plain, and the start time is field 22 overall.
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _owner_record() -> str:
    pid = os.getpid()
    return json.dumps({"pid": pid, "start_time": _start_time(pid)})


def owner_alive(directory: Path) -> bool:
    """Whether the process that created `directory` still runs (unknown owners count as alive
    during a short grace period, since the owner file follows the directory by a moment)."""
    try:
        owner = json.loads((directory / OWNER_FILE).read_text(encoding="utf-8"))
        pid, start_time = int(owner["pid"]), owner["start_time"]
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            return time.time() - directory.stat().st_mtime < _UNOWNED_GRACE_S
        return False
    current = _start_time(pid)
    return current is not None and (start_time is None or current == start_time)


def sweep_orphaned_directories(parent: Path | None = None) -> list[Path]:
    """Remove every sandbox directory under `parent` (default: the temp dir) whose owner is dead
    and that this user may remove; returns the directories removed."""
    parent = Path(tempfile.gettempdir()) if parent is None else parent
    removed = []
    for directory in parent.glob(f"{PREFIX}*"):
        try:
            if not directory.is_dir() or directory.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if not owner_alive(directory):
            shutil.rmtree(directory, ignore_errors=True)
            if not directory.exists():
                removed.append(directory)
    return removed


def _sweep_once() -> None:
    global _swept
    with _sweep_lock:
        if _swept:
            return
        _swept = True
    sweep_orphaned_directories()


@contextlib.contextmanager
def run_directory() -> Iterator[Path]:
    """A fresh private directory for one run, marked with its owner and removed afterwards.

    The first call in a process first removes the directories of dead owners.
    """
    _sweep_once()
    directory = Path(tempfile.mkdtemp(prefix=PREFIX)).resolve()
    try:
        (directory / OWNER_FILE).write_text(_owner_record(), encoding="utf-8")
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
