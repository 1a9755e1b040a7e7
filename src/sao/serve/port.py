"""`sao serve --port`: a port number in range, and free to listen on, checked before the model loads.

Without these checks a bad port cost the whole start (loading the model, restoring the learner)
and ended in uvicorn's own tracebacks.
"""

from __future__ import annotations

import argparse
import errno
import socket

MAX_PORT = 65535


def parse_port(text: str) -> int:
    """An argparse `type`: a TCP port, 1 to 65535, refused in one line otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port 1 to {MAX_PORT}, got {text!r}") from None
    if not 1 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"must be a port 1 to {MAX_PORT}, got {value}")
    return value


def check_port_free(host: str, port: int) -> None:
    """Bind every address `host` resolves to at `port` (as the server will) and let go at once.

    Raises:
        ValueError: one line naming the address and why it cannot be listened on (in use by
            another process, a privileged port, an address not on this machine).
    """
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise ValueError(f"--host {host}: cannot be resolved ({err.strerror})") from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            # The server sets it too: a port left in TIME_WAIT by a previous run is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as err:
                where = (
                    f"{address[0]}:{port}" if family == socket.AF_INET else f"[{address[0]}]:{port}"
                )
                if err.errno == errno.EADDRINUSE:
                    raise ValueError(
                        f"--port {port}: {where} is already in use by another process; choose "
                        "another --port or stop that process"
                    ) from None
                raise ValueError(
                    f"--port {port}: cannot listen on {where} ({err.strerror or err})"
                ) from None
