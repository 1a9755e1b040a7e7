"""`sao inspect seeds`: one markdown row per group of training runs (a preset over seeds): held-out
gain per seed and pooled over the seeds, how episodes ended over the first and last 10 steps, the
critic's explained variance, staleness and wall time. Each group is `LABEL=RUN_DIR[,RUN_DIR...]`:

    sao inspect seeds sao=runs/cr_study/sao_s0,runs/cr_study/sao_s1,runs/cr_study/sao_s2 \\
        grpo=runs/cr_study/grpo_s0,runs/cr_study/grpo_s1,runs/cr_study/grpo_s2

Endings are the share of a step's episodes that ran out of turns (`max_turns`) or ended on a
malformed action (`malformed`), from `summary.json`'s `drift` windows; "rise" is the largest
last-minus-first change over the group's seeds. `submit failing` (code_repair only) is the share
of episodes that submitted after a failing test. Held-out format errors are the in-run eval's
`eval/format_error_rate` at the first and last eval.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from sao.analysis.runs import groups, metrics, summary
from sao.core.windows import ends, finite_mean
from sao.reproduce.seed_pool import pool_paired

WINDOW = 10

HEADER = (
    "| preset | seeds | pass@1 start -> end | gain per seed | pooled paired gain (95% CI) "
    "| out of turns, first -> last 10 steps | malformed endings | submit failing "
    "| held-out format errors | critic EV mean (first 10 / last 10) | staleness | wall |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("groups", nargs="+", help="LABEL=RUN_DIR[,RUN_DIR...]")


def run_facts(run: Path) -> dict[str, Any]:
    """What one run's row needs, read from its `summary.json` and `metrics.jsonl`."""
    done = summary(run)
    rows = metrics(run)
    steps = [r for r in rows if "rollout/reward_mean" in r]
    ev = [r.get("critic/vf_explained_var") for r in steps]
    ev_first, ev_last = ends(ev, WINDOW)
    evals = [r["eval/format_error_rate"] for r in rows if "eval/format_error_rate" in r]
    drift = done.get("drift") or {}
    behaviour = done.get("code_repair_behaviour") or {}
    failing = behaviour.get("submitted_failing", {})
    return {
        "initial": done["initial_accuracy"],
        "final": done["final_accuracy"],
        "gain": done["accuracy_gain"],
        "wall_s": done["wall_s"],
        "ev": (finite_mean(ev), finite_mean(ev_first), finite_mean(ev_last)),
        "staleness": finite_mean(r.get("rollout/staleness_mean") for r in steps),
        "format_errors": (evals[0], evals[-1]) if evals else (math.nan, math.nan),
        "endings": {
            name: (
                drift.get("first", {}).get(name, math.nan),
                drift.get("last", {}).get(name, math.nan),
            )
            for name in ("max_turns", "malformed")
        },
        "submit_failing": (
            failing.get("first_10_steps", math.nan),
            failing.get("last_10_steps", math.nan),
        ),
    }


def _pair(values: list[tuple[float, float]]) -> str:
    first, last = finite_mean(v[0] for v in values), finite_mean(v[1] for v in values)
    rise = max(v[1] - v[0] for v in values)
    return f"{first:.2f} -> {last:.2f} (rise {rise:+.2f})"


def group_row(label: str, runs: list[Path]) -> str:
    """One markdown table row for a group of runs."""
    facts = [run_facts(run) for run in runs]
    pooled = pool_paired([f["gain"] for f in facts])
    low, high = pooled["difference_ci95"]
    per_seed = ", ".join(f"{f['gain']['difference']:+.2f}" for f in facts)
    ev_mean = finite_mean(f["ev"][0] for f in facts)
    ev_text = (
        "-"
        if math.isnan(ev_mean)
        else (
            f"{ev_mean:.2f} ({finite_mean(f['ev'][1] for f in facts):.2f} / "
            f"{finite_mean(f['ev'][2] for f in facts):.2f})"
        )
    )
    initial, final = (
        finite_mean(f["initial"] for f in facts),
        finite_mean(f["final"] for f in facts),
    )
    cells = [
        f"`{label}`",
        str(len(facts)),
        f"{initial:.3f} -> {final:.3f}",
        per_seed,
        f"**{pooled['difference']:+.3f}** ({low:+.3f}, {high:+.3f}), n={pooled['n']}",
        _pair([f["endings"]["max_turns"] for f in facts]),
        _pair([f["endings"]["malformed"] for f in facts]),
        _pair([f["submit_failing"] for f in facts]),
        _pair([f["format_errors"] for f in facts]),
        ev_text,
        f"{finite_mean(f['staleness'] for f in facts):.2f}",
        f"{finite_mean(f['wall_s'] for f in facts):.0f} s",
    ]
    return "| " + " | ".join(cells) + " |"


def run(args: argparse.Namespace) -> int:
    parsed = groups(args.groups, "RUN_DIR")
    print(HEADER)
    for label, runs in parsed:
        print(group_row(label, runs))
    return 0
