"""Find and kill what a sandbox uid left running, for machines without a PID namespace.

With a PID namespace the kernel kills every survivor when the namespace's init exits. Without
one, a process that called `setsid()` escapes the caller's process-group kill; since each run has
its own uid, the caller (root) finds those survivors by uid instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

# A fork bomb may add processes while a round kills; each round kills all it saw, and a
# process-count limit bounds how many can appear in between.
_MAX_ROUNDS = 200
# Killed processes take a moment to finish exiting; no need to rescan /proc faster than that.
_ROUND_PAUSE_S = 0.005


def _real_uid_and_state(pid: str) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
    except (OSError, ValueError):
        return None
    return int(fields["Uid"].split()[0]), fields["State"].strip()


def _processes_of(uids: range, include_zombies: bool) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        owner = _real_uid_and_state(entry)
        if owner is None or owner[0] not in uids:
            continue
        if include_zombies or not owner[1].startswith("Z"):
            found.append(int(entry))
    return found


def live_processes_of(uids: range) -> list[int]:
    """Pids of processes whose real uid is in `uids`, zombies excluded (they are already dead)."""
    return _processes_of(uids, include_zombies=False)


def _kill_if_owned_by(pid: int, uid: int) -> None:
    # A pidfd pins the process: if the pid was reused after the scan, the uid check below sees
    # the new owner and the signal goes nowhere.
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        owner = _real_uid_and_state(str(pid))
        if owner is not None and owner[0] == uid:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)


def kill_processes_of(uid: int) -> bool:
    """SIGKILL every process of `uid` and wait until they are reaped; True when none is left.

    Zombies count: RLIMIT_NPROC counts them too, so the next run with this uid could not
    start until they are reaped (by the sandbox's init, which is still alive when this runs).
    """
    uids = range(uid, uid + 1)
    for _ in range(_MAX_ROUNDS):
        pids = _processes_of(uids, include_zombies=True)
        if not pids:
            return True
        for pid in pids:
            _kill_if_owned_by(pid, uid)
        time.sleep(_ROUND_PAUSE_S)
    return not _processes_of(uids, include_zombies=True)
