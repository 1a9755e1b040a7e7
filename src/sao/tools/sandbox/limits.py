"""The limits one sandboxed run gets, validated, and the names of the isolation layers.

Pure data: nothing here starts a process. `sandbox.py` turns a `SandboxLimits` into the JSON the
child-side launcher reads.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

# Layers the launcher tries and may fail to get; each has a fallback (see docs/sandbox.md).
OPTIONAL_LAYERS: tuple[str, ...] = (
    "pid_namespace",
    "network_namespace",
    "read_only_root",
    "separate_uid",
)
# Layers that are always in place, plus the fallback that replaces a missing network namespace.
ALWAYS_LAYERS: tuple[str, ...] = ("process_group", "resource_limits")
FALLBACK_LAYERS: tuple[str, ...] = ("socket_audit_hook",)
ALL_LAYERS: tuple[str, ...] = ALWAYS_LAYERS + OPTIONAL_LAYERS + FALLBACK_LAYERS

# What takes over when a layer is missing; quoted in the one-time warning.
FALLBACK_FOR_LAYER: dict[str, str] = {
    "pid_namespace": "process-group kill, RLIMIT_NPROC and killing every process of the sandbox uid",
    "network_namespace": "an audit hook in the child interpreter that refuses sockets and exec",
    "read_only_root": "file permissions of the separate uid (none if that layer is missing too)",
    "separate_uid": "the caller's uid (writes and signals are then stopped only by namespaces)",
}

# Python needs some address space just to start; below this every run would fail at start-up.
MIN_MEMORY_MB = 48


def _require_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _require_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return float(value)


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits for one run; construction validates every field.

    Attributes:
        timeout_s: wall-clock limit for the whole run, start-up included.
        cpu_time_s: CPU seconds per process (RLIMIT_CPU, rounded up to whole seconds).
        memory_mb: address space per process (RLIMIT_AS), in MiB.
        max_output_bytes: bytes kept per stream (stdout, stderr); more stops the run.
        max_processes: processes (and threads) the sandbox uid may hold at once (RLIMIT_NPROC).
        max_file_bytes: largest file the code may write (RLIMIT_FSIZE).
        disk_mb: size of the private tmpfs working directory, when the mount layer is active.
    """

    timeout_s: float = 5.0
    cpu_time_s: float = 5.0
    memory_mb: int = 256
    max_output_bytes: int = 64_000
    max_processes: int = 64
    max_file_bytes: int = 16_000_000
    disk_mb: int = 64

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout_s", _require_seconds("timeout_s", self.timeout_s))
        object.__setattr__(self, "cpu_time_s", _require_seconds("cpu_time_s", self.cpu_time_s))
        _require_int("memory_mb", self.memory_mb, MIN_MEMORY_MB)
        _require_int("max_output_bytes", self.max_output_bytes, 1)
        _require_int("max_processes", self.max_processes, 1)
        _require_int("max_file_bytes", self.max_file_bytes, 1)
        _require_int("disk_mb", self.disk_mb, 1)

    def cpu_seconds_soft_hard(self) -> tuple[int, int]:
        """RLIMIT_CPU soft and hard values: SIGXCPU at the soft limit, SIGKILL one second later."""
        soft = max(1, math.ceil(self.cpu_time_s))
        return soft, soft + 1

    def to_json_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values, for the launcher's configuration."""
        return asdict(self)


def validate_skip_layers(skip_layers: Any) -> frozenset[str]:
    """Check that every name in `skip_layers` is an optional layer; return them as a set.

    Raises:
        TypeError: `skip_layers` is a single string or holds non-strings.
        ValueError: a name is not one of `OPTIONAL_LAYERS`.
    """
    if isinstance(skip_layers, (str, bytes)):
        raise TypeError("skip_layers must be a collection of layer names, not a single string")
    names = frozenset(skip_layers)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"skip_layers entries must be str, got {type(name).__name__}")
        if name not in OPTIONAL_LAYERS:
            raise ValueError(f"skip_layers: unknown layer {name!r}; allowed: {OPTIONAL_LAYERS}")
    return names
