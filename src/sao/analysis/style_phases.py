"""`sao inspect style-phases`: for `style_stream` training runs, what each preference phase looked
like as it opened and as it closed: reward, the preferred style's share, the unstyled share, the
policy's entropy and the critic's explained variance (means over `--window` steps at each end of
the phase).

It is the table behind the question "after a switch, does the policy drift into replies without a
style, and is the entropy or the critic behind it?":

    sao inspect style-phases runs/reproduce_full/style_stream_sao/seed0 \\
        runs/reproduce_full/style_stream_running_mean/seed0
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sao.analysis.runs import InspectError, metrics
from sao.core.windows import ends, finite_mean
from sao.envs.style_stream.metrics import UNSTYLED
from sao.envs.style_stream.styles import STYLES

KEYS = ("reward", "preferred", "unstyled", "entropy", "ev")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", help="run directories (each with metrics.jsonl)")
    parser.add_argument("--window", type=int, default=5, help="steps averaged at each end")
    parser.add_argument("--json", default=None, help="also write the numbers here")


def phases(rows: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The trained steps' rows, cut where the batch's preferred style changes."""
    steps = [r for r in rows if "style/preferred_index" in r]
    out: list[list[Mapping[str, Any]]] = []
    for row in steps:
        if not out or out[-1][-1]["style/preferred_index"] != row["style/preferred_index"]:
            out.append([])
        out[-1].append(row)
    return out


def phase_summary(phase: Sequence[Mapping[str, Any]], window: int) -> dict[str, Any]:
    """Means over the first and the last `window` steps of one phase."""
    style = STYLES[int(phase[0]["style/preferred_index"])]

    def unstyled(r: Mapping[str, Any]) -> float:
        return sum(r.get(f"style/share_{kind}", 0.0) for kind in UNSTYLED)

    out: dict[str, Any] = {"style": style, "steps": f"{phase[0]['step']}-{phase[-1]['step']}"}
    for end, rows in zip(("open", "close"), ends(phase, window), strict=True):
        out[f"{end}_reward"] = finite_mean(r.get("rollout/reward_mean") for r in rows)
        out[f"{end}_preferred"] = finite_mean(r.get(f"style/share_{style}") for r in rows)
        out[f"{end}_unstyled"] = finite_mean(unstyled(r) for r in rows)
        out[f"{end}_entropy"] = finite_mean(r.get("actor/entropy") for r in rows)
        out[f"{end}_ev"] = finite_mean(r.get("critic/vf_explained_var") for r in rows)
    return out


def run(args: argparse.Namespace) -> int:
    if args.window < 1:
        raise InspectError(f"--window: must be >= 1, got {args.window}")
    header = f"{'phase':>10s} {'steps':>8s} " + " ".join(f"{k:>17s}" for k in KEYS)
    table: dict[str, list[dict[str, Any]]] = {}
    for run_dir in args.runs:
        table[run_dir] = [phase_summary(p, args.window) for p in phases(metrics(run_dir))]
        print(f"{run_dir}  (open -> close)")
        print(header)
        for p in table[run_dir]:
            cells = " ".join(f"{p[f'open_{k}']:7.3f} -> {p[f'close_{k}']:6.3f}" for k in KEYS)
            print(f"{p['style']:>10s} {p['steps']:>8s} {cells}")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2) + "\n")
    return 0
