"""Named moments where fault-injection tests can stop a run (`tests/faults/`).

With `SAO_FAULT_PAUSE_AT=NAME` in the environment, the process reaching `pause_point(NAME)`
writes NAME to the file `SAO_FAULT_MARKER` and sleeps `SAO_FAULT_PAUSE_S` seconds (default 120),
so a test can kill it at exactly that moment. Unset, a pause point does nothing.

The moments: `sft-saved:N` (SFT state saved after step N), `value-pretraining` (before it
starts), `eval:N` (before the held-out eval of step N), `step-logged:N` (step N's metrics
written, its checkpoint not yet), `checkpoint-write:N` (step N's checkpoint fully written to its
temporary directory, not yet renamed into place).
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def pause_point(name: str) -> None:
    """Pause here if a fault-injection test asked for `name` (see the module docstring)."""
    if os.environ.get("SAO_FAULT_PAUSE_AT") != name:
        return
    marker = os.environ.get("SAO_FAULT_MARKER")
    if marker:
        Path(marker).write_text(name + "\n")
    time.sleep(float(os.environ.get("SAO_FAULT_PAUSE_S", "120")))
