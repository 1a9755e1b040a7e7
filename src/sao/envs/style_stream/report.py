"""`style_stream` in a training run: per-step style metrics and the end-of-run report.

Part of the environment's registration: the runtime calls `step_metrics` on every trained batch
and `run_report` once at the end, and saves the figure it returns.

A requested prompt names its preferred style, so its reward says whether the policy follows a
request, not whether it holds the preference; the style shares, the adaptation lags and the
phase-end rewards are read from the unrequested prompts (in a run without requests, all of them).
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
# Drawn together (`style_requests.png`) in a run with requested prompts.
REQUEST_KEYS: tuple[str, ...] = (
    "rollout/reward_mean",
    "style/reward_unrequested",
    "style/reward_requested",
    "style/request_followed",
)


def step_metrics(batch: Sequence[Trajectory]) -> dict[str, float]:
    """Each style's share of the batch's unrequested replies (and of `UNSTYLED`'s kinds of reply
    without a style), and the batch's majority preferred style.

    With requested prompts in the batch also: `style/requested_share` (always logged, 0 without
    requests), `style/reward_unrequested` and `style/reward_requested` (each when the batch has
    such trajectories) and `style/request_followed`, the share of requested replies in the
    requested style. A batch of requested prompts only gives the shares of all its replies."""
    infos = [t.metadata.get("info", {}) for t in batch]
    asked = [info.get("requested_style") is not None for info in infos]
    own = [info for info, a in zip(infos, asked, strict=True) if not a] or infos
    kinds = Counter(reply_category(info.get("reply"), info.get("style")) for info in own)
    preferred = Counter(info.get("preferred_style") for info in infos).most_common(1)[0][0]
    metrics = {f"style/share_{s}": kinds[s] / len(own) for s in CATEGORIES}
    metrics["style/preferred_index"] = float(STYLES.index(preferred)) if preferred in STYLES else -1
    metrics["style/judge_errors"] = float(sum(bool(i.get("judge_error")) for i in infos))
    metrics["style/requested_share"] = sum(asked) / len(batch)
    if any(asked):
        requested = [t for t, a in zip(batch, asked, strict=True) if a]
        unrequested = [t for t, a in zip(batch, asked, strict=True) if not a]
        metrics["style/reward_requested"] = sum(t.reward for t in requested) / len(requested)
        followed = [
            info.get("style") == info["requested_style"]
            for info, a in zip(infos, asked, strict=True)
            if a
        ]
        metrics["style/request_followed"] = sum(followed) / len(followed)
        if unrequested:
            metrics["style/reward_unrequested"] = sum(t.reward for t in unrequested) / len(
                unrequested
            )
    return metrics


def run_report(rows: list[dict[str, Any]]) -> RunReport:
    """Adaptation lag after each switch, each phase's closing reward and closing style shares,
    and the Figure-5-style figure of style shares (`style_shares.png`).

    A lag is only as meaningful as the level it recovers, the best closing reward of any earlier
    phase (`adaptation_lag`): in a run where no phase learnt its preferred style (closing reward
    near the teacher's 1/len(styles)) a short lag says little, so the report gives each phase's
    closing reward beside the lags.

    In a run with requested prompts the lags and closing rewards (`style_adaptation_lag`,
    `style_phase_end_reward`) are those of the unrequested reward, `style/reward_unrequested`:
    a requested prompt names its style, so its reward would show a switch followed by the
    requests, not by the policy's own preference, which is what a re-adaptation claim measures.
    Such a run's summary also names that key (`style_reward_key`), and gives the mean requested
    share, each phase's closing reward over all prompts (`style_phase_end_reward_all`), over
    requested ones (`style_phase_end_reward_requested`) and its closing share of requests
    followed (`style_phase_end_request_followed`), and a panel of those rewards
    (`style_requests.png`). A run without requests reads
    `rollout/reward_mean` and its summary has none of these keys."""
    steps = [r for r in rows if "style/preferred_index" in r]
    if not steps:
        return RunReport()
    preferred = [int(r["style/preferred_index"]) for r in steps]
    changed = [i for i in range(1, len(steps)) if preferred[i] != preferred[i - 1]]
    switches = [steps[i]["step"] for i in changed]
    with_requests = any(r.get("style/requested_share", 0.0) > 0.0 for r in steps)
    reward_key = "style/reward_unrequested" if with_requests else "rollout/reward_mean"
    rewards = {r["step"]: r[reward_key] for r in steps if r.get(reward_key) is not None}
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
    if with_requests:

        def closing(key: str) -> list[float | None]:
            return phase_end_levels(
                {r["step"]: r[key] for r in steps if r.get(key) is not None}, switches
            )

        summary.update(
            style_reward_key=reward_key,
            style_requested_share=sum(r.get("style/requested_share", 0.0) for r in steps)
            / len(steps),
            style_phase_end_reward_all=closing("rollout/reward_mean"),
            style_phase_end_reward_requested=closing("style/reward_requested"),
            style_phase_end_request_followed=closing("style/request_followed"),
        )
    figure = style_shares_figure(share_rows, switches, preferred=phases)
    panels = {"style_requests.png": ("reward", list(REQUEST_KEYS))} if with_requests else {}
    return RunReport(summary=summary, panels=panels, figures={"style_shares.png": figure})
