"""Metrics of the `style_stream` simulation: style shares, reward per step, adaptation lag.

Pure functions over what the runtime already has -- each trajectory's learner step, reply text
and reward -- plus one figure in the manner of the paper's Figure 5 (style shares over steps,
with the preference switches shaded), which the runtime saves.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sao.envs.style_stream.styles import STYLES, detect_style, marker_counts

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Replies without a style, told apart because they drift for different reasons: markers of
# several styles in a tie (`mixed`), no marker at all (`none`), or no answer to judge (`no_answer`).
MIXED = "mixed"
NO_STYLE = "none"
NO_ANSWER = "no_answer"
UNSTYLED: tuple[str, ...] = (MIXED, NO_STYLE, NO_ANSWER)


def reply_category(reply: str | None, style: str | None, styles: Sequence[str] = STYLES) -> str:
    """`style` when the judge gave one; else `mixed`, `none` or `no_answer` (see `UNSTYLED`)."""
    if reply is None:
        return NO_ANSWER
    if style is not None:
        return style
    return MIXED if any(marker_counts(reply, styles).values()) else NO_STYLE


def style_share_rows(
    replies: Iterable[tuple[int, str]], styles: Sequence[str] = STYLES
) -> list[dict[str, float]]:
    """Per step, the share of replies in each style (and `mixed`, `none`), from `(step, reply)`
    pairs of answered replies.

    Returns rows sorted by step: `{"step": s, "cute": 0.25, ..., "mixed": 0.0, "none": 0.1}`.
    """
    by_step: dict[int, Counter[str]] = defaultdict(Counter)
    for step, reply in replies:
        by_step[step][reply_category(reply, detect_style(reply, styles), styles)] += 1
    rows = []
    for step in sorted(by_step):
        counts = by_step[step]
        total = sum(counts.values())
        rows.append({"step": step, **{s: counts[s] / total for s in (*styles, MIXED, NO_STYLE)}})
    return rows


def reward_per_step(rewards: Iterable[tuple[int, float]]) -> dict[int, float]:
    """Mean reward of each step, from `(step, reward)` pairs."""
    sums: dict[int, list[float]] = defaultdict(list)
    for step, reward in rewards:
        sums[step].append(float(reward))
    return {step: sum(v) / len(v) for step, v in sorted(sums.items())}


def switch_steps(switch_every: int, prompts_per_step: float, num_steps: int) -> list[int]:
    """Learner steps at which the preferred style changes.

    Prompt `i` is trained on at about step `i // prompts_per_step` (`prompts_per_step` is the
    batch size divided by the rollouts per prompt), so switch `k` falls on step
    `floor(k * switch_every / prompts_per_step)`.
    """
    if switch_every < 1 or prompts_per_step <= 0 or num_steps < 0:
        raise ValueError(
            f"switch_every >= 1, prompts_per_step > 0, num_steps >= 0 required, got "
            f"{switch_every}, {prompts_per_step}, {num_steps}"
        )
    steps, k = [], 1
    while (step := math.floor(k * switch_every / prompts_per_step)) < num_steps:
        steps.append(step)
        k += 1
    return steps


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def adaptation_lag(
    rewards_by_step: Mapping[int, float] | Sequence[float],
    switch_steps: Sequence[int],
    frac: float = 0.8,
    window: int = 3,
) -> list[int | None]:
    """Steps after each switch until reward is back to `frac` of the level held before it.

    The level held before switch `s` is the highest closing reward of any earlier phase (the
    mean reward of the `window` steps before each switch up to `s`): after a phase that never
    re-adapted, closing near 0, "back to its level" would be reached at once, so the reference
    stays the best the run had reached. The lag is `t - s` for the first step `t` (before the
    next switch) where the mean over the `window` steps ending at `t` -- all at or after the
    switch `s` -- reaches `frac` times that level; so the smallest possible lag is
    `window - 1`. None when that never happens, or when no reward was logged in the window
    before this switch or any earlier one.

    Args:
        rewards_by_step: mean reward per step, as a mapping or a sequence indexed by step.
        switch_steps: steps at which the preference switched (increasing).
        frac: share of the level held before the switch to recover.
        window: steps averaged on each side.
    """
    if not 0.0 < frac <= 1.0:
        raise ValueError(f"frac: must be in (0, 1], got {frac}")
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window: must be an int >= 1, got {window!r}")
    if list(switch_steps) != sorted(set(switch_steps)):
        raise ValueError(f"switch_steps: must be strictly increasing, got {list(switch_steps)}")
    rewards = (
        dict(rewards_by_step)
        if isinstance(rewards_by_step, Mapping)
        else dict(enumerate(rewards_by_step))
    )
    lags: list[int | None] = []
    held: float | None = None
    for i, switch in enumerate(switch_steps):
        end = switch_steps[i + 1] if i + 1 < len(switch_steps) else math.inf
        before = [rewards[t] for t in range(switch - window, switch) if t in rewards]
        if before:
            held = _mean(before) if held is None else max(held, _mean(before))
        if held is None:
            lags.append(None)
            continue
        target = frac * held
        lag = None
        for t in sorted(t for t in rewards if switch + window - 1 <= t < end):
            recent = [rewards[u] for u in range(t - window + 1, t + 1) if u in rewards]
            if _mean(recent) >= target:
                lag = t - switch
                break
        lags.append(lag)
    return lags


def phase_end_levels(
    rewards_by_step: Mapping[int, float], switch_steps: Sequence[int], window: int = 3
) -> list[float | None]:
    """Mean reward of the last `window` steps of each phase (before the first switch, between
    switches, after the last): how high each phase got. None for a phase with no step."""
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window: must be an int >= 1, got {window!r}")
    bounds = [-math.inf, *switch_steps, math.inf]
    levels: list[float | None] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        steps = sorted(t for t in rewards_by_step if start <= t < end)[-window:]
        levels.append(_mean([rewards_by_step[t] for t in steps]) if steps else None)
    return levels


def style_shares_figure(
    rows: Sequence[Mapping[str, Any]],
    switch_steps: Sequence[int],
    styles: Sequence[str] | None = None,
    preferred: Sequence[str] | None = None,
    title: str = "style shares",
) -> Figure:
    """A figure of each style's share per step, with alternate phases shaded.

    Args:
        rows: output of `style_share_rows` (or any rows with `step` and one key per style).
        switch_steps: steps where the preference switched; shading changes there.
        styles: which keys to draw; by default every key but `step`.
        preferred: the preferred style of each phase, written at the top of its band.
        title: the figure title.
    """
    from matplotlib.figure import Figure

    if not rows:
        raise ValueError("rows: empty, nothing to plot")
    keys = list(styles) if styles is not None else [k for k in rows[0] if k != "step"]
    steps = [row["step"] for row in rows]
    fig = Figure(figsize=(7, 3.5))
    ax = fig.subplots()
    edges = [min(steps), *switch_steps, max(steps) + 1]
    for phase, (left, right) in enumerate(zip(edges, edges[1:], strict=False)):
        if phase % 2:
            ax.axvspan(left, right, color="0.9", zorder=0)
        if preferred:
            label = preferred[phase % len(preferred)]
            ax.text((left + right) / 2, 1.02, label, ha="center", va="bottom", fontsize=8)
    for key in keys:
        ax.plot(steps, [row.get(key, 0.0) for row in rows], label=key)
    ax.set_ylim(0, 1)
    ax.set_xlabel("learner step")
    ax.set_ylabel("share of replies")
    ax.set_title(title, pad=14)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    return fig
