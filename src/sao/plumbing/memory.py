"""This process's resident memory, and its peak phase by phase.

A run's `peak_rss_gb` says how much memory it needed, not what for. `PhasePeaks` splits it: each
`with peaks.phase("evals"):` records the highest resident size reached inside it, so a summary
can say whether value pretraining, training, an eval or writing a checkpoint set the peak.

Linux keeps one high-water mark per process (`VmHWM` in `/proc/self/status`, which `getrusage`'s
`ru_maxrss` also reads) and lets a process reset it to its current size by writing `5` to
`/proc/self/clear_refs`. A phase reads the mark when it ends and resets it when it begins and
ends, so a nested phase (a checkpoint inside training) is taken out of the one around it. Every
mark read is also kept as the whole process's peak, which the resets would otherwise lose.
Where the mark cannot be reset (not Linux, or `/proc` read-only), phases are not told apart
(`by_phase()` is empty) and `peak_gb()` is `ru_maxrss` as before.

Threads share the mark: a phase of the main thread also counts what other threads (the local
backend's rollout thread) held meanwhile. The resets are the process's: a tool outside it that
reads its peak (`/usr/bin/time -v`, `getrusage`) sees only the peak since the last phase edge.
"""

from __future__ import annotations

import re
import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_KIB = 2**20  # KiB in a GiB


def _status_gb(field: str) -> float | None:
    try:
        found = re.search(rf"^{field}:\s+(\d+)\s+kB", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) / _KIB if found else None


def resident_gb() -> float | None:
    """This process's resident memory now, in GiB (None where `/proc` does not say)."""
    return _status_gb("VmRSS")


def _high_water_gb() -> float:
    mark = _status_gb("VmHWM")
    if mark is None:
        scale = 2**30 if sys.platform == "darwin" else _KIB  # macOS reports bytes, Linux KiB
        mark = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale
    return mark


def _reset_high_water() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


class PhasePeaks:
    """The process's peak resident memory, whole and by named phase (GiB)."""

    def __init__(self) -> None:
        self._peaks: dict[str, float] = {}
        self._whole = 0.0
        self._stack: list[str] = []
        self._resettable = True

    def _close_interval(self) -> None:
        """Credit the high-water mark since the last reset to the innermost open phase, then
        reset it."""
        mark = _high_water_gb()
        self._whole = max(self._whole, mark)
        if self._stack and self._resettable:
            name = self._stack[-1]
            self._peaks[name] = max(self._peaks.get(name, 0.0), mark)
        if self._resettable:
            self._resettable = _reset_high_water()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count the peak reached inside the block as `name`'s (a phase entered again keeps its
        highest)."""
        self._close_interval()
        self._stack.append(name)
        try:
            yield
        finally:
            self._close_interval()
            self._stack.pop()

    def peak_gb(self) -> float:
        """The whole process's peak so far, every phase and the time between them."""
        return max(self._whole, _high_water_gb())

    def by_phase(self) -> dict[str, float]:
        """Each phase's own peak (a nested phase's time taken out of its parent's); empty where
        the high-water mark cannot be reset."""
        return dict(self._peaks) if self._resettable else {}
