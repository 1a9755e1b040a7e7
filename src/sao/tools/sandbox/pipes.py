"""Read a child's stdout and stderr with a byte cap and a deadline.

The caller's memory stays bounded however much the child writes: at most `cap` bytes are kept
per stream, and reading stops (so the caller can kill the child) as soon as a stream overflows.
"""

from __future__ import annotations

import os
import selectors
import time
from dataclasses import dataclass

READ_CHUNK = 65_536


@dataclass(frozen=True)
class Captured:
    """What the pipes gave before reading stopped.

    Attributes:
        stdout: first bytes of stdout (at most the cap).
        stderr: first bytes of stderr (at most the cap).
        stop: `"eof"` (both streams closed), `"deadline"` or `"overflow"` (a stream passed the cap).
    """

    stdout: bytes
    stderr: bytes
    stop: str


def read_bounded(stdout_fd: int, stderr_fd: int, deadline: float, cap: int) -> Captured:
    """Read both pipes until both close, `deadline` (a `time.monotonic()` value) or overflow."""
    buffers = {stdout_fd: bytearray(), stderr_fd: bytearray()}
    stop = "eof"
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stop = "deadline"
                break
            for key, _ in selector.select(timeout=remaining):
                chunk = os.read(key.fd, READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buffer = buffers[key.fd]
                buffer += chunk[: cap + 1 - len(buffer)]
                if len(buffer) > cap:
                    del buffer[cap:]
                    stop = "overflow"
            if stop == "overflow":
                break
    return Captured(bytes(buffers[stdout_fd]), bytes(buffers[stderr_fd]), stop)


def drain(fds: list[int], grace_s: float) -> bool:
    """Discard from `fds` until all close or `grace_s` passes; True when all closed.

    Called after the child was killed: every process holding a pipe end is gone once both
    pipes report end-of-file, so a True return means nothing the code started survives.
    """
    deadline = time.monotonic() + grace_s
    with selectors.DefaultSelector() as selector:
        for fd in fds:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for key, _ in selector.select(timeout=remaining):
                if not os.read(key.fd, READ_CHUNK):
                    selector.unregister(key.fd)
    return True
