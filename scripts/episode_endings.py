"""How a run's episodes ended, by ending and the last environment events, with how many of each
earned a reward: the question "what does the policy do when it fails, and does it pay?".

python scripts/episode_endings.py runs/code_repair_sao --last 0.25

Reads the run's `trajectories.jsonl` (every completed episode); an ending is the episode's
`end_reason` (answer, max_turns, ...) and, where the environment records them (code_repair does),
its last `--events` events (replace, test_failed, submit, error, ...); a last action the
environment could not carry out is named with its `format_error` (`error:unclosed_tool`).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any


def ending_key(metadata: dict[str, Any], events: int) -> str:
    """`"max_turns: replace > test_failed > replace"` for one episode's metadata."""
    info = metadata.get("info") or {}
    reason = info.get("end_reason") or metadata.get("end_reason") or "unknown"
    tail = list(info.get("events") or [])[-events:] if events else []
    if tail and tail[-1] == "error" and info.get("format_error"):
        tail[-1] = f"error:{info['format_error']}"
    return f"{reason}: {' > '.join(tail)}" if tail else str(reason)


def endings(rows: list[dict[str, Any]], events: int) -> list[tuple[str, int, int]]:
    """`(ending, episodes, rewarded)` for each ending, most common first."""
    seen: Counter[str] = Counter()
    rewarded: Counter[str] = Counter()
    for row in rows:
        key = ending_key(row.get("metadata") or {}, events)
        seen[key] += 1
        rewarded[key] += float(row.get("reward") or 0.0) > 0
    return [(key, count, rewarded[key]) for key, count in seen.most_common()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", help="run directories (each with trajectories.jsonl)")
    parser.add_argument("--last", type=float, default=0.25, help="share of episodes, latest first")
    parser.add_argument("--events", type=int, default=3, help="last events named per ending")
    parser.add_argument("--top", type=int, default=6, help="endings printed per run")
    args = parser.parse_args(argv)
    if not 0 < args.last <= 1:
        raise SystemExit(f"--last: must be in (0, 1], got {args.last}")
    for run in args.runs:
        path = Path(run) / "trajectories.jsonl"
        if not path.is_file():
            raise SystemExit(f"{path}: no such file")
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        part = rows[len(rows) - max(1, round(len(rows) * args.last)) :]
        print(f"{run}: last {len(part)} of {len(rows)} episodes")
        for key, count, paid in endings(part, args.events)[: args.top]:
            print(f"  {count / len(part):6.1%}  rewarded {paid:4d}/{count:<4d} {key}")


if __name__ == "__main__":
    main()
