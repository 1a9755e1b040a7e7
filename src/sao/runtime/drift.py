"""Behaviour drift: how episodes end, step by step, and whether endings without an answer rose.

A policy can learn to stop answering -- run out of turns or tokens, write actions the
environment cannot parse, stop on EOS -- while the reward curve only looks flat. These pure
functions (no I/O) turn each trained batch into shares per ending, compare the first `window`
steps of a run with the latest `window`, and decide when to warn; `sao.runtime.train` prints the
warning and `sao.runtime.report` writes the summary.

How one trajectory ended (`ending`), from the metadata the agent loop records:

- `answer`: the environment took a final answer (right or wrong);
- `malformed`: out of turns on an action the environment could not parse (the last step's
  `format_error` is set);
- `max_turns`, `max_tokens`, `eos` (the policy stopped without an action the environment
  accepted), `env_error`, or any other `end_reason` an environment records, as recorded.
  A trained batch never holds an `env_error` (those are set aside untrained and counted apart,
  `sao.runtime.env_errors`), so its share stays 0 in a training run; it is kept as a column.

Every ending other than `answer` counts as "no answer". A window's share of an ending is the mean
of its per-step shares (each step weighs the same). The check warns when the no-answer share of
the latest window exceeds the first window's by more than `warn_rise` and by more than two
standard errors of that difference (`sqrt(p1 (1 - p1) / n1 + p2 (1 - p2) / n2)` over the
windows' episode counts), so that one episode of a tiny batch cannot warn on its own. It warns
once per crossing: it re-arms only after the rise has fallen back to at most half of
`warn_rise`, so a share hovering at the threshold does not warn every step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sao.core.windows import ends, finite_mean
from sao.envs.base import END_ANSWER, END_MAX_TOKENS, END_MAX_TURNS

MALFORMED = "malformed"
NO_ANSWER = "no_answer"
# Endings whose share is logged at every step, seen or not, so metric columns stay stable.
# "eos" and "env_error" are the agent loop's own end reasons (`sao.rollout.agent_loop`).
STANDARD_ENDINGS = (END_ANSWER, END_MAX_TURNS, END_MAX_TOKENS, MALFORMED, "eos", "env_error")
METRIC_PREFIX = "rollout/end_"
EPISODES_METRIC = "rollout/episodes"
# Standard errors of the rise a warning must exceed (about 2.3% one-sided false alarms).
NOISE_Z = 2.0
# Float noise in a mean of shares must not turn "equal to the threshold" into "more than it".
_EPS = 1e-9
_MAX_DEFAULT_WINDOW = 10


def ending(metadata: Mapping[str, Any]) -> str:
    """How the trajectory with this metadata ended (see the module docstring)."""
    reason = str(metadata.get("end_reason"))
    info = metadata.get("info") or {}
    if reason == END_MAX_TURNS and info.get("format_error"):
        return MALFORMED
    return reason


def ending_shares(metadatas: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Share of the trajectories per ending: every standard ending (0.0 when unseen), any other
    ending seen, and `no_answer` (all but `answer`); empty for no trajectories."""
    if not metadatas:
        return {}
    counts = dict.fromkeys(STANDARD_ENDINGS, 0)
    for meta in metadatas:
        name = ending(meta)
        counts[name] = counts.get(name, 0) + 1
    n = len(metadatas)
    shares = {name: count / n for name, count in counts.items()}
    shares[NO_ANSWER] = (n - counts[END_ANSWER]) / n
    return shares


def ending_metrics(metadatas: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """A trained batch's endings as step metrics: `rollout/episodes` (how many trajectories)
    and each share as `rollout/end_answer`, ..., `rollout/end_no_answer`; empty for none."""
    if not metadatas:
        return {}
    shares = {METRIC_PREFIX + name: share for name, share in ending_shares(metadatas).items()}
    return {EPISODES_METRIC: len(metadatas), **shares}


@dataclass(frozen=True)
class StepShares:
    """One learner step's ending shares, over `episodes` trajectories."""

    step: int
    episodes: int
    shares: dict[str, float]


def step_shares(row: Mapping[str, Any]) -> StepShares | None:
    """The endings logged in one `metrics.jsonl` row; None for a row without them (an eval-only
    row, or one written before these metrics existed)."""
    episodes = row.get(EPISODES_METRIC)
    if not isinstance(row.get(METRIC_PREFIX + NO_ANSWER), int | float) or not episodes:
        return None
    shares = {
        key[len(METRIC_PREFIX) :]: float(value)
        for key, value in row.items()
        if key.startswith(METRIC_PREFIX) and isinstance(value, int | float)
    }
    return StepShares(int(row["step"]), int(episodes), shares)


def drift_window(steps: int, configured: int | None = None) -> int:
    """Steps per window: `configured` (`train.drift_window`) when set, else a quarter of the
    run's `steps`, 1 to 10, so the check starts halfway through a short run and after 20 steps
    of a long one."""
    if configured is not None:
        return configured
    return max(1, min(_MAX_DEFAULT_WINDOW, steps // 4))


@dataclass(frozen=True)
class DriftCheck:
    """The first `window` steps compared with the latest `window`.

    Attributes:
        first_steps, last_steps: `(first, last)` learner step of each window.
        first_episodes, last_episodes: trajectories in each window.
        first, last: mean share per ending over each window (every ending seen in either).
        rise: `last["no_answer"] - first["no_answer"]`.
        noise: `NOISE_Z` standard errors of `rise` (see the module docstring).
        drifted: whether `rise` is more than both the threshold it was checked against and
            `noise`.
    """

    first_steps: tuple[int, int]
    last_steps: tuple[int, int]
    first_episodes: int
    last_episodes: int
    first: dict[str, float]
    last: dict[str, float]
    rise: float
    noise: float
    drifted: bool


def _window_means(window: Sequence[StepShares], names: Iterable[str]) -> dict[str, float]:
    # A step that did not see an ending had none of it: 0, not a step left out of the mean.
    return {name: finite_mean(s.shares.get(name, 0.0) for s in window) for name in names}


def compare_windows(
    history: Sequence[StepShares], window: int, warn_rise: float
) -> DriftCheck | None:
    """Compare the first `window` steps of `history` with its last `window`; None until the two
    windows no longer overlap (fewer than `2 * window` steps)."""
    head, tail = ends(history, window)
    if len(history) < 2 * window:
        return None
    names = sorted({name for s in [*head, *tail] for name in s.shares})
    first, last = _window_means(head, names), _window_means(tail, names)
    p1, p2 = first.get(NO_ANSWER, 0.0), last.get(NO_ANSWER, 0.0)
    n1, n2 = sum(s.episodes for s in head), sum(s.episodes for s in tail)
    rise = p2 - p1
    noise = NOISE_Z * math.sqrt(max(0.0, p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2))
    return DriftCheck(
        first_steps=(head[0].step, head[-1].step),
        last_steps=(tail[0].step, tail[-1].step),
        first_episodes=n1,
        last_episodes=n2,
        first=first,
        last=last,
        rise=rise,
        noise=noise,
        drifted=rise > warn_rise + _EPS and rise > noise + _EPS,
    )


@dataclass
class DriftMonitor:
    """Checks after every step and says when to warn: once per crossing (see module docstring).

    Args:
        window: steps per window.
        warn_rise: the rise of the no-answer share that warns.
    """

    window: int
    warn_rise: float
    history: list[StepShares] = field(default_factory=list)
    armed: bool = True
    warned_at: list[int] = field(default_factory=list)

    def observe(self, step: StepShares) -> DriftCheck | None:
        """Add one step's endings; returns the check when it is a new crossing (warn now)."""
        self.history.append(step)
        check = compare_windows(self.history, self.window, self.warn_rise)
        if check is None:
            return None
        if check.drifted and self.armed:
            self.armed = False
            self.warned_at.append(step.step)
            return check
        if not self.armed and check.rise <= self.warn_rise / 2 + _EPS:
            self.armed = True
        return None


def replay(rows: Iterable[Mapping[str, Any]], window: int, warn_rise: float) -> DriftMonitor:
    """A monitor fed every metric row with ending shares, in order: what a run's online checks
    did (and do on resume, seeded with the rows already logged)."""
    monitor = DriftMonitor(window, warn_rise)
    for row in rows:
        step = step_shares(row)
        if step is not None:
            monitor.observe(step)
    return monitor


def _rose_most(check: DriftCheck) -> str:
    """The no-answer ending whose share rose most (first by name on a tie)."""
    names = [n for n in check.last if n not in (END_ANSWER, NO_ANSWER)]
    if not names:
        return NO_ANSWER
    return max(sorted(names), key=lambda n: check.last[n] - check.first.get(n, 0.0))


def warning_line(check: DriftCheck, warn_rise: float) -> str:
    """The one console line a crossing prints."""
    most = _rose_most(check)
    (a, b), (c, d) = check.first_steps, check.last_steps
    return (
        f"sao train: behaviour drift: episodes ending without an answer rose from "
        f"{check.first[NO_ANSWER]:.0%} (steps {a}-{b}, {check.first_episodes} episodes) to "
        f"{check.last[NO_ANSWER]:.0%} (steps {c}-{d}, {check.last_episodes} episodes), most of it {most} ({check.first[most]:.0%} -> "
        f"{check.last[most]:.0%}); more than train.drift_warn_rise={warn_rise:g}"
    )


def drift_summary(
    rows: Sequence[Mapping[str, Any]], window: int, warn_rise: float
) -> dict[str, Any]:
    """The `drift` entry of `summary.json`: the final comparison of the first and last windows,
    and the steps at which the run warned (replayed from `rows`, so across resumes)."""
    monitor = replay(rows, window, warn_rise)
    check = compare_windows(monitor.history, window, warn_rise)
    entry: dict[str, Any] = {
        "window_steps": window,
        "warn_rise": warn_rise,
        "steps_with_shares": len(monitor.history),
        "checked": check is not None,
        "warned": bool(monitor.warned_at),
        "warned_at_steps": list(monitor.warned_at),
    }
    if check is not None:
        entry.update(
            first_steps=list(check.first_steps),
            last_steps=list(check.last_steps),
            first_episodes=check.first_episodes,
            last_episodes=check.last_episodes,
            first=check.first,
            last=check.last,
            no_answer_rise=check.rise,
            noise=check.noise,
            drifted_at_end=check.drifted,
        )
    return entry
