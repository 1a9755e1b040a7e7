"""`code_repair` in a training run: behaviour metrics from each trajectory's command history.

The reward alone cannot say *why* a policy passes or fails. These shares of a trained batch can:

- `code_repair/first_test_passed`: the first `test` passed every visible test, i.e. the first
  edit was right -- what the warm start gets wrong most often;
- `code_repair/submitted_failing`: the last `test` failed and the policy submitted anyway;
- `code_repair/viewed`: the policy looked at the file again (the teacher does so to retry);
- `code_repair/out_of_turns`: the turn budget ran out before `submit`;
- `code_repair/malformed`: at least one command could not be parsed.

A trajectory's history is `metadata["info"]["events"]`, written by `CodeRepairEnv` when the
episode ends: `view`, `replace`, `test_passed`, `test_failed`, `submit` or `error`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sao.core.windows import ends, finite_mean
from sao.envs.base import END_MAX_TURNS
from sao.envs.registration import RunReport

if TYPE_CHECKING:
    from sao.trajectory import Trajectory

KEYS = (
    "code_repair/first_test_passed",
    "code_repair/submitted_failing",
    "code_repair/viewed",
    "code_repair/out_of_turns",
    "code_repair/malformed",
)


def _events(trajectory: Trajectory) -> list[str]:
    info = trajectory.metadata.get("info") or {}
    return list(info.get("events") or [])


def step_metrics(batch: Sequence[Trajectory]) -> dict[str, float]:
    """Shares of `batch` showing each behaviour (see the module docstring); empty for no rows."""
    histories = [_events(t) for t in batch]
    if not histories:
        return {}
    n = len(histories)

    def share(flags: list[bool]) -> float:
        return sum(flags) / n

    tests = [[e for e in h if e.startswith("test_")] for h in histories]
    return {
        "code_repair/first_test_passed": share([bool(t) and t[0] == "test_passed" for t in tests]),
        "code_repair/submitted_failing": share(
            [
                bool(h) and h[-1] == "submit" and bool(t) and t[-1] == "test_failed"
                for h, t in zip(histories, tests, strict=True)
            ]
        ),
        "code_repair/viewed": share(["view" in h for h in histories]),
        "code_repair/out_of_turns": share(
            [t.metadata.get("end_reason") == END_MAX_TURNS for t in batch]
        ),
        "code_repair/malformed": share(["error" in h for h in histories]),
    }


def run_report(rows: list[dict[str, Any]], window: int = 10) -> RunReport:
    """The behaviour shares over steps (panel `behaviour.png`), and the mean of the first and
    last `window` steps of each, so `summary.json` shows what training changed."""
    summary: dict[str, dict[str, float]] = {}
    for key in KEYS:
        values = [float(r[key]) for r in rows if isinstance(r.get(key), int | float)]
        if values:
            first, last = ends(values, window)
            summary[key.split("/")[1]] = {
                f"first_{len(first)}_steps": finite_mean(first),
                f"last_{len(last)}_steps": finite_mean(last),
            }
    return RunReport(
        summary={"code_repair_behaviour": summary} if summary else {},
        panels={"behaviour.png": ("share of trained trajectories", list(KEYS))},
    )
