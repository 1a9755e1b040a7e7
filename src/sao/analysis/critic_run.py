"""`sao inspect critic-ceiling run`: a run's critic beside the ceiling, checkpoint by checkpoint.

`critic/vf_explained_var` alone cannot say how good a critic is: on calc the returns themselves
allow a perfect critic only about half of their variance. For every checkpoint a run kept
(`RUN_DIR/checkpoints/step_N`), this samples fresh trajectories from that checkpoint's policy and
reports, on the same trajectories, the oracle's ceiling (`sao.analysis.critic_oracle`: what any
critic could explain there) and the checkpoint's own critic's explained variance, measured as
the learner measures it; beside them, the explained variance the run logged over its last
`--window` learner steps up to that checkpoint (each step's on its own batch, before that step's
critic updates). The last column is the oracle's own check (`replay_gap`): endings of a recorded
prefix should return what the recorded trajectory did from there; where its interval excludes 0
the table says that the ceiling at that step cannot be trusted. Its interval is the wider of
the gaps' measured spread over trajectories and the spread the endings imply for a recording, so
recordings that happen to hold none of a rare outcome (on calc at 0.9 success, a tool call that
fails) fail it by luck no more often than a 95% interval should
(docs/notebook/2026-12-07-critic-replay-check.md).

    sao inspect critic-ceiling run runs/calc_sao --trajectories 128

The trajectories are seeded by the run's `train.seed`, so every invocation draws the same ones,
and a lucky draw stays lucky; `--seed S` draws others.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from sao.analysis.critic_oracle import check_counts, measure
from sao.analysis.runs import InspectError, metrics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run directory with checkpoints (sao train's --out)")
    parser.add_argument("--trajectories", type=int, default=128, help="sampled per checkpoint")
    parser.add_argument("--probes", type=int, default=4, help="action tokens probed per trajectory")
    parser.add_argument("--continuations", type=int, default=8, help="endings per probe")
    parser.add_argument(
        "--window", type=int, default=5, help="learner steps of the logged figure (default 5)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="seeds the sampled trajectories and their endings (default: the run's train.seed)",
    )


def run(args: argparse.Namespace) -> int:
    check_counts(args.trajectories, args.probes, args.continuations)
    if args.window < 1:
        raise InspectError("--window must be >= 1")
    from sao.config import ConfigError, load_run_config
    from sao.runtime.checkpoints import checkpoint_dir, checkpoint_steps

    run_dir = Path(args.run)
    try:
        overrides = [] if args.seed is None else [f"train.seed={args.seed}"]
        config = load_run_config(run_dir, overrides)
    except (ConfigError, OSError) as err:
        raise InspectError(str(err).splitlines()[0]) from None
    if config.model.lora.rank:
        raise InspectError(f"{run_dir}: a LoRA run's checkpoints hold adapters; not supported")
    start = Path(config.model.path) if config.model.path else config.warm_start_dir()
    steps = sorted(checkpoint_steps(run_dir))
    if not steps:
        raise InspectError(f"{run_dir} has no checkpoints")
    logged = _logged_explained_variance(metrics(run_dir))
    rows = []
    for step in steps:
        result = measure(
            config,
            start,
            checkpoint_dir(run_dir, step),
            args.trajectories,
            args.probes,
            args.continuations,
        )
        row = {
            "step": step,
            "logged_ev": _window_mean(logged, step, args.window),
            "critic_ev": result["critic_ev"],
            "ceiling_ev": result["ev_oracle"],
            "ceiling_ev_95": result["ev_oracle_95"],
            "reward_mean": result["reward_mean"],
            "trajectories": result["trajectories"],
            "replay_gap": result["replay_gap"],
            "replay_gap_95": result["replay_gap_95"],
            "tool_errors_per_call": result["tool_errors_per_call"],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(table(rows, args.window))
    return 0


def table(rows: list[dict[str, Any]], window: int) -> str:
    """The rows as a Markdown table."""
    lines = [
        f"| step | logged EV (last {window} steps) | critic EV | ceiling EV (95%) | reward "
        "| replay gap (95%) |",
        "|---|---|---|---|---|---|",
    ]
    failed = []
    for r in rows:
        low, high = r["ceiling_ev_95"]
        gap_low, gap_high = r["replay_gap_95"]
        lines.append(
            f"| {r['step']} | {_fmt(r['logged_ev'])} | {_fmt(r['critic_ev'])} | "
            f"{_fmt(r['ceiling_ev'])} ({_fmt(low)} to {_fmt(high)}) | {r['reward_mean']:.3f} | "
            f"{_fmt(r['replay_gap'])} ({_fmt(gap_low)} to {_fmt(gap_high)}) |"
        )
        if gap_low > 0 or gap_high < 0:
            failed.append(str(r["step"]))
    if failed:
        lines.append(
            f"\nReplay check failed at step {', '.join(failed)}: endings of the recorded "
            "prefixes did not return what the recorded trajectories did. Either the endings are "
            "not drawn as episodes are, or the recordings are an unusual draw (the same one at "
            "every invocation, since they are seeded; another --seed or more --trajectories "
            "tells which); the ceiling there cannot be trusted."
        )
    return "\n".join(lines)


def _logged_explained_variance(rows: list[dict[str, Any]]) -> dict[int, float]:
    key = "critic/vf_explained_var"  # null where it was not finite (strict JSON)
    return {int(r["step"]): float(r[key]) for r in rows if r.get(key) is not None and "step" in r}


def _window_mean(logged: dict[int, float], step: int, window: int) -> float:
    """Mean of the logged figure over steps `step - window + 1 .. step` (NaN if none is there;
    step 0, before any learner step, has none)."""
    values = [logged[s] for s in range(step - window + 1, step + 1) if s in logged]
    values = [v for v in values if math.isfinite(v)]
    return sum(values) / len(values) if values else math.nan


def _fmt(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.3f}"
