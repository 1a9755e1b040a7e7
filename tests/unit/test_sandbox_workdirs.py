"""Sandbox directories are removed even when their owner was killed: by the next run at latest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sao.tools.sandbox import run_python, workdirs

SLEEPER = """
from sao.tools.sandbox import run_python
run_python("import time\\ntime.sleep(60)\\n", timeout_s=60)
"""


def _owned_by(pid: int) -> list[Path]:
    found = []
    for directory in Path("/tmp").glob(f"{workdirs.PREFIX}*"):
        try:
            owner = json.loads((directory / workdirs.OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if owner["pid"] == pid:
            found.append(directory)
    return found


def _wait_for(condition, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    pytest.fail("condition not met in time")


def test_a_sigkilled_callers_directory_is_swept_by_the_next_run(monkeypatch):
    caller = subprocess.Popen(
        [sys.executable, "-c", SLEEPER], env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    try:
        (left,) = _wait_for(lambda: _owned_by(caller.pid))
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait()
    assert left.is_dir()  # nobody could clean up after a SIGKILL
    monkeypatch.setattr(workdirs, "_swept", False)  # as in a freshly started process
    assert run_python("print(7)").stdout == "7\n"
    assert not left.exists()


def test_directories_of_live_owners_are_kept_and_dead_ones_removed(tmp_path):
    mine = tmp_path / f"{workdirs.PREFIX}mine"
    mine.mkdir()
    (mine / workdirs.OWNER_FILE).write_text(workdirs._owner_record())
    reused_pid = tmp_path / f"{workdirs.PREFIX}reused"
    reused_pid.mkdir()
    record = {"pid": os.getpid(), "start_time": workdirs._start_time(os.getpid()) + 1}
    (reused_pid / workdirs.OWNER_FILE).write_text(json.dumps(record))
    dead = tmp_path / f"{workdirs.PREFIX}dead"
    (dead / "work").mkdir(parents=True)
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    (dead / workdirs.OWNER_FILE).write_text(
        json.dumps({"pid": int(finished.stdout), "start_time": 1})
    )
    young_unowned = tmp_path / f"{workdirs.PREFIX}young"
    young_unowned.mkdir()
    old_unowned = tmp_path / f"{workdirs.PREFIX}old"
    old_unowned.mkdir()
    os.utime(old_unowned, (time.time() - 3600, time.time() - 3600))
    unrelated = tmp_path / "other-dir"
    unrelated.mkdir()

    removed = workdirs.sweep_orphaned_directories(tmp_path)

    assert sorted(removed) == sorted([reused_pid, dead, old_unowned])
    assert mine.is_dir() and young_unowned.is_dir() and unrelated.is_dir()


def test_a_finished_run_leaves_no_directory():
    assert run_python("print(1)").exit_code == 0
    assert _owned_by(os.getpid()) == []
