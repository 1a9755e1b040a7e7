"""`sao inspect endings`: how a run's episodes ended, by ending and the last environment events,
with how many of each earned a reward: the question "what does the policy do when it fails, and
does it pay?".

    sao inspect endings runs/code_repair_sao --last 0.25

Reads the run's `trajectories.jsonl` (every completed episode); an ending is the episode's
`end_reason` (answer, max_turns, ...) and, where the environment records them (code_repair does),
its last `--events` events (replace, test_failed, submit, error, ...); a last action the
environment could not carry out is named with its `format_error` (`error:unclosed_tool`).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sao.analysis.runs import latest, trajectory_rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs", nargs="+", type=Path, help="run directories (each with trajectories.jsonl)"
    )
    parser.add_argument("--last", type=float, default=0.25, help="share of episodes, latest first")
    parser.add_argument("--events", type=int, default=3, help="last events named per ending")
    parser.add_argument("--top", type=int, default=6, help="endings printed per run")


def episode_events(row: Mapping[str, Any]) -> list[str]:
    """The environment's events of one trajectory record (`metadata.info.events`; empty for an
    environment that records none)."""
    return list(((row.get("metadata") or {}).get("info") or {}).get("events") or [])


def rewarded(row: Mapping[str, Any]) -> bool:
    """Whether the episode earned a positive reward."""
    return float(row.get("reward") or 0.0) > 0


def ending_key(metadata: Mapping[str, Any], events: int) -> str:
    """`"max_turns: replace > test_failed > replace"` for one episode's metadata."""
    info = metadata.get("info") or {}
    reason = info.get("end_reason") or metadata.get("end_reason") or "unknown"
    tail = list(info.get("events") or [])[-events:] if events else []
    if tail and tail[-1] == "error" and info.get("format_error"):
        tail[-1] = f"error:{info['format_error']}"
    return f"{reason}: {' > '.join(tail)}" if tail else str(reason)


def endings(rows: Iterable[Mapping[str, Any]], events: int) -> list[tuple[str, int, int]]:
    """`(ending, episodes, rewarded)` for each ending, most common first."""
    seen: Counter[str] = Counter()
    paid: Counter[str] = Counter()
    for row in rows:
        key = ending_key(row.get("metadata") or {}, events)
        seen[key] += 1
        paid[key] += rewarded(row)
    return [(key, count, paid[key]) for key, count in seen.most_common()]


def run(args: argparse.Namespace) -> int:
    for run_dir in args.runs:
        rows = trajectory_rows(run_dir)
        part = latest(rows, args.last)
        print(f"{run_dir}: last {len(part)} of {len(rows)} episodes")
        for key, count, paid in endings(part, args.events)[: args.top]:
            print(f"  {count / len(part):6.1%}  rewarded {paid:4d}/{count:<4d} {key}")
    return 0
