"""What a code_repair policy does right after a failed test, by the turns it has left, early and
late in its runs, and what each choice went on to earn: the question "where does the drift away
from submitting start, and does it pay?".

python scripts/failed_test_choices.py runs/code_repair_sao --episodes 320

Reads each run's `trajectories.jsonl` (in completion order) and its `config.yaml` (`env.max_turns`);
a choice is the command after a `test_failed` event (`replace`, `submit`, `error` for a malformed
action, ...); "turns left" counts the choice itself (1: the last action allowed). Runs are
pooled: the first and the last `--episodes` episodes of each run form the two windows.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

Choices = dict[int, Counter[tuple[str, bool]]]


def choices(rows: Iterable[dict[str, Any]], max_turns: int) -> Choices:
    """`{turns_left: Counter((choice, rewarded))}` over the choices after every failed test."""
    out: Choices = defaultdict(Counter)
    for row in rows:
        events = list(((row.get("metadata") or {}).get("info") or {}).get("events") or [])
        paid = float(row.get("reward") or 0.0) > 0
        for i, event in enumerate(events[:-1]):
            if event == "test_failed":
                out[max_turns - (i + 1)][(events[i + 1], paid)] += 1
    return out


def merge(parts: Iterable[Choices]) -> Choices:
    """The sum of several runs' choices."""
    out: Choices = defaultdict(Counter)
    for part in parts:
        for left, counts in part.items():
            out[left].update(counts)
    return out


def describe(table: Choices) -> list[str]:
    """One line per turns-left count: each choice's share and how many of its episodes paid."""
    lines = []
    for left in sorted(table, reverse=True):
        chosen: Counter[str] = Counter()
        for (kind, _), n in table[left].items():
            chosen[kind] += n
        total = sum(chosen.values())
        cells = [
            f"{kind} {n / total:.0%} (paid {table[left][(kind, True)]}/{n})"
            for kind, n in sorted(chosen.items(), key=lambda item: (-item[1], item[0]))
        ]
        lines.append(
            f"  {left} turn{'' if left == 1 else 's'} left, {total:4d} choices: " + ", ".join(cells)
        )
    return lines


def _load(run: Path) -> tuple[list[dict[str, Any]], int]:
    path = run / "trajectories.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path}: no such file")
    config = yaml.safe_load((run / "config.yaml").read_text())
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows, int(config["env"]["max_turns"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", help="run directories (trajectories.jsonl, config.yaml)")
    parser.add_argument("--episodes", type=int, default=320, help="episodes per window and run")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        raise SystemExit(f"--episodes: must be >= 1, got {args.episodes}")
    first, last = [], []
    for run in args.runs:
        rows, max_turns = _load(Path(run))
        first.append(choices(rows[: args.episodes], max_turns))
        last.append(choices(rows[-args.episodes :], max_turns))
    for label, parts in (("first", first), ("last", last)):
        print(f"{label} {args.episodes} episodes of {len(args.runs)} run(s):")
        print("\n".join(describe(merge(parts))))


if __name__ == "__main__":
    main()
