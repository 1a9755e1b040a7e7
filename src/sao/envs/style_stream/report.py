"""`style_stream` in a training run: per-step style metrics and the end-of-run report.

Part of the environment's registration: the runtime calls `step_metrics` on every trained batch
and `run_report` once at the end, and saves the figure it returns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sao.envs.registration import RunReport
from sao.envs.style_stream.metrics import (
    UNSTYLED,
    adaptation_lag,
    phase_end_levels,
    reply_category,
    style_shares_figure,
)
from sao.envs.style_stream.styles import STYLES

if TYPE_CHECKING:
    from sao.trajectory import Trajectory

CATEGORIES: tuple[str, ...] = (*STYLES, *UNSTYLED)


def step_metrics(batch: Sequence[Trajectory]) -> dict[str, float]:
    """Each style's share of the batch's replies (and of `UNSTYLED`'s kinds of reply without a
    style), and the batch's majority preferred style."""
    infos = [t.metadata.get("info", {}) for t in batch]
    kinds = Counter(reply_category(info.get("reply"), info.get("style")) for info in infos)
    preferred = Counter(info.get("preferred_style") for info in infos).most_common(1)[0][0]
    metrics = {f"style/share_{s}": kinds[s] / len(batch) for s in CATEGORIES}
    metrics["style/preferred_index"] = float(STYLES.index(preferred)) if preferred in STYLES else -1
    metrics["style/judge_errors"] = float(sum(bool(i.get("judge_error")) for i in infos))
    return metrics


def run_report(rows: list[dict[str, Any]]) -> RunReport:
    """Adaptation lag after each switch, each phase's closing reward and closing style shares,
    and the Figure-5-style figure of style shares (`style_shares.png`).

    A lag is only as meaningful as the level it recovers: after a phase that never learnt the
    preferred style (closing reward near the teacher's 1/len(styles)), a short lag says little,
    so the report gives each phase's closing reward beside the lags."""
    steps = [r for r in rows if "style/preferred_index" in r]
    if not steps:
        return RunReport()
    preferred = [int(r["style/preferred_index"]) for r in steps]
    changed = [i for i in range(1, len(steps)) if preferred[i] != preferred[i - 1]]
    switches = [steps[i]["step"] for i in changed]
    rewards = {r["step"]: r["rollout/reward_mean"] for r in steps}
    lags = adaptation_lag(rewards, switches)
    # Rows logged before the unstyled kinds were told apart have only `none`.
    kinds = [s for s in CATEGORIES if any(f"style/share_{s}" in r for r in steps)]
    share_rows = [
        {"step": r["step"], **{s: r.get(f"style/share_{s}", 0.0) for s in kinds}} for r in steps
    ]
    levels = {s: phase_end_levels({r["step"]: r[s] for r in share_rows}, switches) for s in kinds}
    closing_shares = [{s: levels[s][i] for s in kinds} for i in range(len(switches) + 1)]
    phases = [STYLES[preferred[i]] for i in [0, *changed]]
    summary = {
        "style_switch_steps": switches,
        "style_adaptation_lag": lags,
        "style_phase_end_reward": phase_end_levels(rewards, switches),
        "style_phase_end_shares": closing_shares,
        "style_judge_errors": int(sum(r.get("style/judge_errors", 0) for r in steps)),
    }
    figure = style_shares_figure(share_rows, switches, preferred=phases)
    return RunReport(summary=summary, figures={"style_shares.png": figure})
