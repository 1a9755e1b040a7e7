"""Run untrusted (model-written) Python in an isolated child process.

`run_python` is the only way the project runs such code. Each call gets a fresh interpreter in a
new session, with resource limits, a private working directory that is removed afterwards (or,
if the caller is killed, by the next process's first run), and as many kernel isolation layers
as the machine grants (PID, network and mount namespaces, a separate unprivileged uid). A layer
the OS refuses is replaced by its fallback and reported by one warning;
`sandbox_capabilities()` says which layers are active. See docs/sandbox.md.

At most `max_concurrency()` children run at once (default: the CPU count), so a burst of calls
queues instead of starving the machine.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sao.tools.sandbox.cleanup import kill_processes_of
from sao.tools.sandbox.limits import (
    ALWAYS_LAYERS,
    FALLBACK_FOR_LAYER,
    OPTIONAL_LAYERS,
    SandboxLimits,
    validate_skip_layers,
)
from sao.tools.sandbox.outcome import RunEnd, describe_error, reported_exit_code
from sao.tools.sandbox.pipes import Captured, drain, read_bounded
from sao.tools.sandbox.workdirs import run_directory

logger = logging.getLogger(__name__)

_SANDBOX_DIR = Path(__file__).resolve().parent
_LAUNCHER = _SANDBOX_DIR / "launcher.py"
_NETWORK_GUARD = _SANDBOX_DIR / "network_guard.py"
# Once killed, the namespace's processes need a moment to release the pipes.
_KILL_GRACE_S = 5.0
_STDERR_TAIL_CHARS = 2_000
# Each run in flight has its own uid, so RLIMIT_NPROC of one run never counts another's
# processes; the block of uids depends on the caller's pid so two callers rarely share one.
_UID_BASE = 100_000
_MAX_SLOTS = 100
_UID_BLOCKS = 10_000


@dataclass(frozen=True)
class SandboxResult:
    """What one sandboxed run produced.

    Attributes:
        stdout: captured standard output (UTF-8, undecodable bytes replaced), at most the cap.
        stderr: captured standard error, same rules; holds the traceback when the code raised.
        exit_code: exit status when the code ended by itself; `-N` when signal N killed it;
            None when the sandbox stopped it (timeout, output cap) or could not start it.
        timed_out: the wall-clock limit passed.
        error: a short description of a sandbox-level event (timeout, memory or CPU limit,
            killed by signal N, output truncated, sandbox failure); None for a normal run or an
            ordinary exception in the code.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    error: str | None


class _Gate:
    """At most `size` runs at once; replaced whole by `set_max_concurrency`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.semaphore = threading.Semaphore(size)


_gate = _Gate(min(os.cpu_count() or 2, _MAX_SLOTS))
# Uid indices are claimed apart from the gate, so a gate replaced mid-run never hands one uid to
# two live runs.
_uid_lock = threading.Lock()
_uid_indices_in_use: set[int] = set()
_warned_layers: set[str] = set()
_warn_lock = threading.Lock()


def set_max_concurrency(limit: int) -> None:
    """Allow at most `limit` sandboxed children at once (1 to 100); runs in flight finish."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int, got {type(limit).__name__}")
    if not 1 <= limit <= _MAX_SLOTS:
        raise ValueError(f"limit must be between 1 and {_MAX_SLOTS}, got {limit}")
    global _gate
    _gate = _Gate(limit)


def max_concurrency() -> int:
    """How many sandboxed children may run at once."""
    return _gate.size


@contextlib.contextmanager
def _reserved_slot() -> Iterator[int]:
    """Wait for the gate, then claim a free uid index for the run's lifetime."""
    gate = _gate
    with gate.semaphore:
        with _uid_lock:
            index = next((i for i in range(_MAX_SLOTS) if i not in _uid_indices_in_use), None)
            if index is None:
                raise RuntimeError(f"more than {_MAX_SLOTS} sandboxed runs in flight")
            _uid_indices_in_use.add(index)
        try:
            yield index
        finally:
            with _uid_lock:
                _uid_indices_in_use.discard(index)


def sandbox_uids() -> range:
    """The uids this process's sandboxed code runs as when the `separate_uid` layer is active."""
    first = _UID_BASE + (os.getpid() % _UID_BLOCKS) * _MAX_SLOTS
    return range(first, first + _MAX_SLOTS)


def _paths_the_code_needs() -> list[str]:
    executable = os.path.realpath(sys.executable)
    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(executable),
        str(_SANDBOX_DIR),
    }
    return sorted(os.path.realpath(path) for path in paths)


def _warn_missing_layers(
    layers: dict[str, bool], reasons: dict[str, str], skip: frozenset[str]
) -> None:
    if not layers:
        # The launcher failed before probing; its setup error says so, a warning would guess.
        return
    for name in OPTIONAL_LAYERS:
        if layers.get(name, False) or name in skip:
            continue
        with _warn_lock:
            if name in _warned_layers:
                continue
            _warned_layers.add(name)
        logger.warning(
            "sandbox layer %r unavailable (%s); falling back to %s",
            name,
            reasons.get(name, "not reported"),
            FALLBACK_FOR_LAYER[name],
        )


def _read_status(status_fd: int) -> dict[str, Any]:
    """Merge the JSON-lines status records written so far (non-blocking)."""
    os.set_blocking(status_fd, False)
    data = b""
    try:
        while chunk := os.read(status_fd, 65_536):
            data += chunk
    except BlockingIOError:
        pass
    merged: dict[str, Any] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            merged.update(json.loads(line))
        except json.JSONDecodeError:
            continue
    return merged


def _kill_group(process: subprocess.Popen) -> None:
    # Before the launcher is reaped its pid cannot be reused, so its group id is still ours.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _stop_run(
    process: subprocess.Popen,
    pipes: list[int],
    uid: int | None,
    layers: dict[str, bool] | None,
    ended: bool,
) -> None:
    """Kill whatever is left of a run and return once none of its processes is alive."""
    if not ended and uid is not None and layers is not None and not layers["pid_namespace"]:
        # Kill by uid while the sandbox's init still lives to reap the dead, then let it exit
        # by itself; killed first, it would leave the zombies to host init, and zombies count
        # against the next run's RLIMIT_NPROC.
        kill_processes_of(uid)
        drain(pipes, _KILL_GRACE_S)
    _kill_group(process)
    if not ended:
        drain(pipes, _KILL_GRACE_S)
        if uid is not None:
            # A killed process closes its pipes before it has fully exited; wait that out.
            kill_processes_of(uid)


def _launch(
    root: Path, limits: SandboxLimits, skip: frozenset[str], uid: int | None, fd: int
) -> subprocess.Popen:
    config = {
        "caller_pid": os.getpid(),
        "status_fd": fd,
        "python": sys.executable,
        "code_path": str(root / "main.py"),
        "work_dir": str(root / "work"),
        "guard_path": str(_NETWORK_GUARD),
        "uid": uid,
        "skip": sorted(skip),
        "reachable_paths": [*_paths_the_code_needs(), str(root)],
        "limits": {
            **limits.to_json_dict(),
            "cpu_seconds_soft_hard": limits.cpu_seconds_soft_hard(),
        },
    }
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(_LAUNCHER), json.dumps(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(fd,),
        start_new_session=True,
        cwd=root,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
    )


def _run_in(
    root: Path, code: str, limits: SandboxLimits, skip: frozenset[str], slot: int
) -> tuple[Captured, dict[str, Any]]:
    root.chmod(0o755)
    (root / "work").mkdir(mode=0o700)
    # Lone surrogates pass through, so the child reports them as a decoding SyntaxError.
    (root / "main.py").write_bytes(code.encode("utf-8", "surrogatepass"))
    (root / "main.py").chmod(0o644)
    uid = sandbox_uids()[slot] if "separate_uid" not in skip and os.getuid() == 0 else None
    status_read, status_write = os.pipe()
    try:
        process = _launch(root, limits, skip, uid, status_write)
    finally:
        os.close(status_write)
    captured = None
    try:
        with process:
            pipes = [process.stdout.fileno(), process.stderr.fileno()]
            try:
                deadline = time.monotonic() + limits.timeout_s
                captured = read_bounded(*pipes, deadline=deadline, cap=limits.max_output_bytes)
            finally:
                # Also on the caller's exceptions (KeyboardInterrupt included): nothing survives.
                status = _read_status(status_read)
                ended = captured is not None and captured.stop == "eof"
                _stop_run(process, pipes, uid, status.get("layers"), ended)
        status.update(_read_status(status_read))
    finally:
        os.close(status_read)
    return captured, status


def _run_once(
    code: str, limits: SandboxLimits, skip: frozenset[str]
) -> tuple[Captured, dict[str, Any]]:
    with _reserved_slot() as slot, run_directory() as root:
        return _run_in(root, code, limits, skip, slot)


def run_python(
    code: str,
    timeout_s: float = 5.0,
    memory_mb: int = 256,
    max_output_bytes: int = 64_000,
    *,
    cpu_time_s: float | None = None,
    max_processes: int = 64,
    max_file_bytes: int = 16_000_000,
    disk_mb: int = 64,
    skip_layers: Iterable[str] = (),
) -> SandboxResult:
    """Run `code` as the main script of a fresh, isolated Python interpreter.

    Args:
        code: Python source text.
        timeout_s: wall-clock limit for the whole run.
        memory_mb: address-space limit per process, MiB (at least 48).
        max_output_bytes: bytes kept per stream; more stops the run and sets `error`.
        cpu_time_s: CPU seconds per process; defaults to `timeout_s`.
        max_processes: processes and threads the code may hold at once.
        max_file_bytes: largest file the code may write.
        disk_mb: size of the private working directory (when the mount layer is active).
        skip_layers: optional layers not to use (names from `OPTIONAL_LAYERS`), e.g. to test
            a fallback.

    Returns:
        A `SandboxResult`; hostile or broken code never raises here.

    Raises:
        TypeError, ValueError: an argument is of the wrong type or out of range.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be str, got {type(code).__name__}")
    limits = SandboxLimits(
        timeout_s=timeout_s,
        cpu_time_s=timeout_s if cpu_time_s is None else cpu_time_s,
        memory_mb=memory_mb,
        max_output_bytes=max_output_bytes,
        max_processes=max_processes,
        max_file_bytes=max_file_bytes,
        disk_mb=disk_mb,
    )
    skip = validate_skip_layers(skip_layers)
    captured, status = _run_once(code, limits, skip)
    _warn_missing_layers(status.get("layers", {}), status.get("reasons", {}), skip)
    stderr = captured.stderr.decode("utf-8", "replace")
    end = RunEnd(
        exit_code=status.get("exit_code"),
        signal_number=status.get("signal"),
        timed_out=captured.stop == "deadline",
        truncated=captured.stop == "overflow",
        setup_error=status.get("setup_error"),
        stderr_tail=stderr[-_STDERR_TAIL_CHARS:],
    )
    return SandboxResult(
        stdout=captured.stdout.decode("utf-8", "replace"),
        stderr=stderr,
        exit_code=reported_exit_code(end),
        timed_out=end.timed_out,
        error=describe_error(end, limits),
    )


@functools.lru_cache(maxsize=1)
def _probe_layers() -> dict[str, bool]:
    _, status = _run_once("pass\n", SandboxLimits(), frozenset())
    layers = status.get("layers", {})
    found = {name: True for name in ALWAYS_LAYERS}
    found.update({name: bool(layers.get(name, False)) for name in OPTIONAL_LAYERS})
    found["socket_audit_hook"] = bool(layers.get("socket_audit_hook", False))
    return found


def sandbox_capabilities() -> dict[str, bool]:
    """Which isolation layers a run gets on this machine (probed once with a trivial run).

    Keys: `process_group`, `resource_limits` (always on), `pid_namespace`, `network_namespace`,
    `read_only_root`, `separate_uid` (optional layers) and `socket_audit_hook` (the fallback
    used when there is no network namespace).
    """
    return dict(_probe_layers())
