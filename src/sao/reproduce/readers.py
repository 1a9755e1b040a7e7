"""The numbers a claim reads from one finished run directory (`summary.json`, `metrics.jsonl`).

Each reader returns one float per run; a run that lacks what a reader needs raises
`MissingMetric`, naming the file and the key, so a claim over it is reported as missing data
rather than as a number made up.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sao.plumbing.durable import read_jsonl


class MissingMetric(LookupError):
    """A run directory lacks a value a claim needs."""


@dataclass(frozen=True)
class Metric:
    """A per-run number: its name in the report, what it is, and how to read it."""

    name: str
    description: str
    read: Callable[[Path], float]


def read_summary(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "summary.json"
    if not path.is_file():
        raise MissingMetric(f"{path}: no summary.json (the run has not finished)")
    return json.loads(path.read_text())


def _summary_value(run_dir: Path, key: str) -> Any:
    summary = read_summary(run_dir)
    if summary.get(key) is None:
        raise MissingMetric(f"{run_dir / 'summary.json'}: no {key}")
    return summary[key]


def _step_series(run_dir: Path, key: str) -> list[float]:
    """`key` over the learner steps that logged it, in step order (non-finite values kept); only
    of a finished run, since an unfinished one's steps would not compare with the others'."""
    read_summary(run_dir)
    rows = read_jsonl(run_dir / "metrics.jsonl")
    series = [float(row[key]) for row in rows if key in row and row[key] is not None]
    if not series:
        raise MissingMetric(f"{run_dir / 'metrics.jsonl'}: no step logs {key}")
    return series


def final_accuracy(run_dir: Path) -> float:
    """Held-out pass@1 at the end of the run."""
    return float(_summary_value(run_dir, "final_accuracy"))


def step_mean(key: str) -> Callable[[Path], float]:
    """Mean of `key` over the run's learner steps (finite values; NaN if none was finite)."""

    def read(run_dir: Path) -> float:
        finite = [v for v in _step_series(run_dir, key) if math.isfinite(v)]
        return sum(finite) / len(finite) if finite else math.nan

    return read


def step_roughness(key: str) -> Callable[[Path], float]:
    """Mean absolute change of `key` from one logged step to the next: lower is smoother."""

    def read(run_dir: Path) -> float:
        series = [v for v in _step_series(run_dir, key) if math.isfinite(v)]
        if len(series) < 2:
            raise MissingMetric(f"{run_dir / 'metrics.jsonl'}: fewer than 2 finite {key}")
        return sum(abs(b - a) for a, b in zip(series[:-1], series[1:], strict=True)) / (
            len(series) - 1
        )

    return read


def after_first_switch_phase_end_reward(run_dir: Path) -> float:
    """style_stream: mean closing reward of the phases after the first preference switch (in a
    run whose stream requests styles, of the unrequested prompts: the report computes
    `style_phase_end_reward` from them)."""
    levels = _summary_value(run_dir, "style_phase_end_reward")[1:]
    levels = [level for level in levels if level is not None]
    if not levels:
        raise MissingMetric(f"{run_dir / 'summary.json'}: no phase after a switch")
    return sum(levels) / len(levels)


def adaptation_lag_censored(run_dir: Path) -> float:
    """style_stream: mean steps to recover after each switch; a phase that never recovers counts
    as its full length (the lag is at least that), so a run that never re-adapts is the slowest.
    In a run whose stream requests styles the report's lags follow the unrequested reward."""
    summary = read_summary(run_dir)
    switches = summary.get("style_switch_steps") or []
    lags = summary.get("style_adaptation_lag") or []
    if not switches:
        raise MissingMetric(f"{run_dir / 'summary.json'}: no preference switch in the run")
    ends = [*switches[1:], int(summary["steps"])]
    values = [
        float(lag) if lag is not None else float(end - start)
        for lag, start, end in zip(lags, switches, ends, strict=True)
    ]
    return sum(values) / len(values)
