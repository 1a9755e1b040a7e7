"""Print, for `style_stream` training runs, what each preference phase looked like as it opened and
as it closed: reward, the preferred style's share, the unstyled share, the policy's entropy and
the critic's explained variance (means over `--window` steps at each end of the phase).

It is the table behind the question "after a switch, does the policy drift into replies without a
style, and is the entropy or the critic behind it?":

python scripts/style_stream_phases.py runs/reproduce_full/style_stream_sao/seed0 \
    runs/reproduce_full/style_stream_running_mean/seed0
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from sao.envs.style_stream.metrics import UNSTYLED
from sao.envs.style_stream.styles import STYLES


def phases(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The trained steps' rows, cut where the batch's preferred style changes."""
    steps = [r for r in rows if "style/preferred_index" in r]
    out: list[list[dict[str, Any]]] = []
    for row in steps:
        if not out or out[-1][-1]["style/preferred_index"] != row["style/preferred_index"]:
            out.append([])
        out[-1].append(row)
    return out


def phase_summary(phase: list[dict[str, Any]], window: int) -> dict[str, Any]:
    """Means over the first and the last `window` steps of one phase."""
    style = STYLES[int(phase[0]["style/preferred_index"])]

    def mean(rows: list[dict[str, Any]], value: Any) -> float:
        values = [v for v in (value(r) for r in rows) if v is not None and math.isfinite(v)]
        return sum(values) / len(values) if values else math.nan

    def unstyled(r: dict[str, Any]) -> float:
        return sum(r.get(f"style/share_{kind}", 0.0) for kind in UNSTYLED)

    out: dict[str, Any] = {"style": style, "steps": f"{phase[0]['step']}-{phase[-1]['step']}"}
    for end, rows in (("open", phase[:window]), ("close", phase[-window:])):
        out[f"{end}_reward"] = mean(rows, lambda r: r.get("rollout/reward_mean"))
        out[f"{end}_preferred"] = mean(rows, lambda r, s=style: r.get(f"style/share_{s}"))
        out[f"{end}_unstyled"] = mean(rows, unstyled)
        out[f"{end}_entropy"] = mean(rows, lambda r: r.get("actor/entropy"))
        out[f"{end}_ev"] = mean(rows, lambda r: r.get("critic/vf_explained_var"))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", help="run directories (each with metrics.jsonl)")
    parser.add_argument("--window", type=int, default=5, help="steps averaged at each end")
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    keys = ("reward", "preferred", "unstyled", "entropy", "ev")
    header = f"{'phase':>10s} {'steps':>8s} " + " ".join(f"{k:>17s}" for k in keys)
    table: dict[str, list[dict[str, Any]]] = {}
    for run in args.runs:
        path = Path(run) / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        table[run] = [phase_summary(p, args.window) for p in phases(rows)]
        print(f"{run}  (open -> close)")
        print(header)
        for p in table[run]:
            cells = " ".join(f"{p[f'open_{k}']:7.3f} -> {p[f'close_{k}']:6.3f}" for k in keys)
            print(f"{p['style']:>10s} {p['steps']:>8s} {cells}")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2) + "\n")


if __name__ == "__main__":
    main()
