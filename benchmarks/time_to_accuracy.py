"""Time to accuracy, side by side: `sao` and `grpo` trained one after the other from the same
warm start, and the ratio of SAO's training seconds to GRPO's final held-out accuracy over GRPO's
own (claim (h) of `sao reproduce`, one seed, `sao.reproduce.time_to_accuracy`).

Each run is an ordinary `sao train` run (claim (h)'s timed arm: held-out evals at points of
training time and of trajectories, off the training clock, with the rollout side paused for
them), at the `sao reproduce` budget's size (`quick` by default). The two runs share the
environment's warm start (built first if missing, as `sao train` does). Finished runs in `--out`
are reused, so a second call only re-reads them.

    python benchmarks/time_to_accuracy.py [--env calc|code_repair] [--latency] [--seed 0]
        [--budget quick|full] [--candidate sao|sao_mb4] [--out runs/bench_tta] [--json PATH]

`--candidate sao_mb4` times SAO with four DIS updates per batch (claim (h_mb4)) in `sao`'s place.

Prints each run's target, seconds to it and wall time, and `ratio` (claimed: below 0.5) with the
bracket its evals allow (`ratio_bracket`);
`--json` also writes them (`-` for stdout only).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sao.reproduce.budgets import BUDGETS
from sao.reproduce.claims import timed_arm
from sao.reproduce.runs import (
    PlannedRun,
    execute,
    run_dir_for,
    train_in_process,
    warm_start_once,
)
from sao.reproduce.time_to_accuracy import CLAIMED_RATIO, read_curve, time_ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=["calc", "code_repair"], default="calc")
    parser.add_argument("--latency", action="store_true", help="claim (h_latency)'s overlay")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", choices=sorted(BUDGETS), default="quick")
    parser.add_argument("--candidate", choices=["sao", "sao_mb4"], default="sao")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_tta"))
    parser.add_argument("--json", default=None, help="also write the numbers here (- : stdout)")
    args = parser.parse_args()

    out = args.out / args.budget
    sao, grpo = (timed_arm(args.env, p, args.latency) for p in (args.candidate, "grpo"))
    runs = [PlannedRun(arm, args.seed, run_dir_for(out, arm, args.seed)) for arm in (sao, grpo)]
    execute(runs, BUDGETS[args.budget], train_in_process, warm_start_once)
    sao_curve, grpo_curve = (read_curve(run.run_dir) for run in runs)
    ratio = time_ratio(sao_curve, grpo_curve)
    result = {
        "env": args.env,
        "latency": list(sao.overrides),
        "budget": args.budget,
        "seed": args.seed,
        "candidate": args.candidate,
        "target_accuracy": ratio.target,
        "sao_seconds_to_target": ratio.candidate_s,
        "grpo_seconds_to_target": ratio.reference_s,
        "sao_train_s": sao_curve.seconds[-1],
        "grpo_train_s": grpo_curve.seconds[-1],
        "sao_final_accuracy": sao_curve.accuracy[-1],
        "ratio": ratio.ratio,
        # The crossings lie between evals, so the ratio does too; null high: never reached.
        "ratio_bracket": None if ratio.low is None else [ratio.low, ratio.high],
        "claimed_below": CLAIMED_RATIO,
        "note": ratio.reason,
        "curves": {"sao": sao_curve.to_dict(), "grpo": grpo_curve.to_dict()},
    }
    sao_s = "never" if ratio.candidate_s is None else f"{ratio.candidate_s:.1f} s"
    shown = "n/a" if ratio.ratio is None else f"{ratio.ratio:.3f}"
    if ratio.low is not None:
        high = "unbounded" if ratio.high is None else f"{ratio.high:.3f}"
        shown += f" (between evals: {ratio.low:.3f} to {high})"
    print(
        f"{args.env}{' + latency' if args.latency else ''} ({args.budget}, seed {args.seed}): "
        f"target {ratio.target:.3f} (grpo final); grpo {ratio.reference_s:.1f} s, "
        f"{args.candidate} {sao_s}; "
        f"ratio {shown} (claimed < {CLAIMED_RATIO:g}){'; ' + ratio.reason if ratio.reason else ''}"
    )
    if args.json == "-":
        print(json.dumps(result, indent=2))
    elif args.json is not None:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
