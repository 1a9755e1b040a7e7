"""`sao inspect failed-tests`: what a code_repair policy does right after a failed test, by the
turns it has left, early and late in its runs, and what each choice went on to earn: the question
"where does the drift away from submitting start, and does it pay?".

    sao inspect failed-tests runs/code_repair_sao --episodes 320

Reads each run's `trajectories.jsonl` (in completion order) and its `config.yaml`
(`env.max_turns`); a choice is the command after a `test_failed` event (`replace`, `submit`,
`error` for a malformed action, ...); "turns left" counts the choice itself (1: the last action
allowed). Runs are pooled: the first and the last `--episodes` episodes of each run form the two
windows.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sao.analysis.endings import episode_events, rewarded
from sao.analysis.runs import InspectError, run_config, trajectory_rows
from sao.core.windows import ends

Choices = dict[int, Counter[tuple[str, bool]]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs", nargs="+", type=Path, help="run directories (trajectories.jsonl, config.yaml)"
    )
    parser.add_argument("--episodes", type=int, default=320, help="episodes per window and run")


def choices(rows: Iterable[Mapping[str, Any]], max_turns: int) -> Choices:
    """`{turns_left: Counter((choice, rewarded))}` over the choices after every failed test."""
    out: Choices = defaultdict(Counter)
    for row in rows:
        events = episode_events(row)
        paid = rewarded(row)
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


def run(args: argparse.Namespace) -> int:
    if args.episodes < 1:
        raise InspectError(f"--episodes: must be >= 1, got {args.episodes}")
    first, last = [], []
    for run_dir in args.runs:
        rows = trajectory_rows(run_dir)
        max_turns = int(run_config(run_dir)["env"]["max_turns"])
        head, tail = ends(rows, args.episodes)
        first.append(choices(head, max_turns))
        last.append(choices(tail, max_turns))
    for label, parts in (("first", first), ("last", last)):
        print(f"{label} {args.episodes} episodes of {len(args.runs)} run(s):")
        print("\n".join(describe(merge(parts))))
    return 0
