"""Turn how a sandboxed run ended into `exit_code` and a short `error` line.

Pure: no processes, no I/O, so every rule is unit-testable on its own.

`error` names a sandbox-level event (timeout, a limit, a signal, truncation, a sandbox failure).
An ordinary exception in the code (exit code 1 with a traceback) is not a sandbox event: it gets
`error=None`, and the traceback in `stderr` says what happened.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from sao.tools.sandbox.limits import SandboxLimits

MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "out of memory")
FILE_SIZE_MARKERS = ("File too large", "[Errno 27]")


@dataclass(frozen=True)
class RunEnd:
    """Raw facts about how a run ended, as the caller observed them.

    Attributes:
        exit_code: the code's exit status when it exited on its own, else None.
        signal_number: the signal that killed the code process, else None.
        timed_out: the wall-clock deadline passed and the caller killed the run.
        truncated: a stream passed `max_output_bytes` and the caller killed the run.
        setup_error: the launcher's report when isolation could not be set up.
        stderr_tail: the end of the captured stderr, to recognise limit errors.
    """

    exit_code: int | None
    signal_number: int | None
    timed_out: bool
    truncated: bool
    setup_error: str | None
    stderr_tail: str


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def reported_exit_code(end: RunEnd) -> int | None:
    """`exit_code` for the result: the status, `-N` for death by signal N, None if stopped."""
    if end.timed_out or end.truncated or end.setup_error is not None:
        return None
    if end.signal_number is not None:
        return -end.signal_number
    return end.exit_code


def describe_error(end: RunEnd, limits: SandboxLimits) -> str | None:
    """A short human-readable line for a sandbox-level event, or None if there was none."""
    if end.setup_error is not None:
        return f"sandbox failure: {end.setup_error}"
    if end.timed_out:
        return f"timed out after {limits.timeout_s:g} s (wall clock); process killed"
    if end.truncated:
        return f"output truncated at {limits.max_output_bytes} bytes per stream; process killed"
    if end.signal_number == signal.SIGXCPU:
        cpu_limit = limits.cpu_seconds_soft_hard()[0]
        return f"CPU time limit of {cpu_limit} s exceeded (SIGXCPU)"
    if end.exit_code != 0 and any(marker in end.stderr_tail for marker in MEMORY_MARKERS):
        return f"memory limit of {limits.memory_mb} MB exceeded"
    if end.signal_number is not None:
        return f"killed by signal {end.signal_number} ({_signal_name(end.signal_number)})"
    if end.exit_code != 0 and any(marker in end.stderr_tail for marker in FILE_SIZE_MARKERS):
        return f"file size limit of {limits.max_file_bytes} bytes exceeded"
    if end.exit_code is None:
        return "sandbox failure: the launcher ended without reporting an exit status"
    return None
