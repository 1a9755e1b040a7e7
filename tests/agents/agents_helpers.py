"""Helpers of the agent tests: the environment of a child `sao` process, a free port, a handle
on the live server."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

import httpx

import sao

BATCH = 8  # rewards per learner step of the test server


def subprocess_env() -> dict[str, str]:
    """This process's environment with this `sao` source first on the path, one thread, no key."""
    source = str(Path(sao.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("SAO_API_KEY", None)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class LiveServer:
    """A running `sao serve`: its base URL, served model id and log file."""

    url: str
    model: str
    log: Path

    def status(self) -> dict:
        return httpx.get(f"{self.url}/v1/status", timeout=30).json()
