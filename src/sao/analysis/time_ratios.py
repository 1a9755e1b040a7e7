"""`sao inspect time-ratios`: claim (h)'s per-seed time-to-accuracy ratios for runs made outside
`sao reproduce`: each candidate run against the reference run of the same seed (same order), with
the reference's final held-out accuracy as the target, read from both runs' eval curves
(training seconds, value pretraining counted, evals not; `sao.reproduce.time_to_accuracy`). Also
the trajectories each needed to reach that target, so time and sample efficiency can be told
apart, and each ratio's bracket (the crossings lie between evals); the last line judges the
seeds at the brackets' ends, as `sao reproduce` does:

    sao inspect time-ratios \\
        --candidate runs/h_iso/sao_mb4_s0,runs/h_iso/sao_mb4_s1,runs/h_iso/sao_mb4_s2 \\
        --reference runs/reproduce_h_full/calc_grpo_timed/seed0,...

`--evals PATTERN` builds each run's curve from held-out evals saved beside it instead of its
in-run evals: `sao eval --run RUN --step N --baseline WARM_START --json RUN/eval400_stepN.json`
with `--evals 'eval400_step{step}.json'`. The accuracy is then each eval's paired gain over the
baseline (0 at step 0, before any update), so every point is measured on the same tasks; the
time of step N is the run's clock at that step (value pretraining plus `time/train_s`), and its
trajectories are those sampled by then. `RUN@N` ends that run's curve at step N (a run continued
past the point it is compared at). An eval of a checkpoint records it (`weights_from`); one whose
checkpoint is not the step its name says is refused.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sao.analysis.runs import InspectError, metrics
from sao.reproduce.readers import MissingMetric
from sao.reproduce.report import judge_brackets
from sao.reproduce.stats import interval_text
from sao.reproduce.time_to_accuracy import (
    CLAIMED_RATIO,
    Curve,
    read_curve,
    time_ratio,
    time_to_accuracy,
)


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


def _bracket(bracket: tuple[float, float | None] | None) -> str:
    if bracket is None:
        return "n/a"
    low, high = bracket
    return f"{low:.2f} to {'unbounded' if high is None else format(high, '.2f')}"


def seed_row(candidate: Curve, reference: Curve) -> dict[str, Any]:
    """One seed's numbers: the target, both runs' seconds and trajectories to it, the ratio read
    from the lines between evals and the bracket the evals allow for it."""
    ratio = time_ratio(candidate, reference)
    target = ratio.target
    return {
        "target": target,
        "candidate_s": ratio.candidate_s,
        "reference_s": ratio.reference_s,
        "ratio": ratio.ratio,
        "bracket": None if ratio.low is None else (ratio.low, ratio.high),
        "reason": ratio.reason,
        "candidate_traj": time_to_accuracy(candidate.trajectories, candidate.accuracy, target),
        "reference_traj": time_to_accuracy(reference.trajectories, reference.accuracy, target),
        "candidate_final": candidate.accuracy[-1],
        "candidate_end_s": candidate.seconds[-1],
        "reference_end_s": reference.seconds[-1],
    }


def rule_line(
    ratios: Sequence[float | None], brackets: Sequence[Sequence[float | None] | None] | None = None
) -> str:
    """Claim (h)'s verdict over the seeds, judged as `sao reproduce` judges it: each seed's ratio
    minus the claimed 0.5, a Student-t 95% interval over every seed (none if a seed has no
    ratio), the verdict taken at the ends of the seeds' brackets (`brackets`, `[low, high]` with
    high None when SAO never reached the target; left out: every ratio is exact)."""
    exact = brackets is None
    if brackets is None:
        brackets = [None if r is None else (r, r) for r in ratios]
    judged = judge_brackets(list(ratios), brackets, CLAIMED_RATIO, "less", 0.0)
    shown = interval_text({**judged, "ends": None} if exact else judged)
    seeds = list(range(len(ratios)))
    return f"ratio - {CLAIMED_RATIO} over seeds {seeds}: {shown}: {judged['verdict']}"


def read_eval_curve(run_dir: Path, pattern: str, last_step: int | None = None) -> Curve:
    """The curve of the evals `run_dir/PATTERN` (`{step}` standing for the learner step) up to
    `last_step`: paired gain over each eval's baseline against the run's clock and trajectories at
    that step, starting from (step 0, gain 0)."""
    if pattern.count("{step}") != 1:
        raise InspectError(f"--evals {pattern!r}: the pattern must hold {{step}} once")
    rows = {int(r["step"]): r for r in metrics(run_dir) if "time/train_s" in r}
    if 0 not in rows:
        raise InspectError(f"{run_dir / 'metrics.jsonl'}: no step-0 row with time/train_s")
    pretrain = float(rows[0].get("time/value_pretrain_s", 0.0))
    before, after = pattern.split("{step}")
    named = re.compile(re.escape(before) + r"(\d+)" + re.escape(after) + "$")
    points = {0: 0.0}
    for path in run_dir.glob(pattern.replace("{step}", "*")):
        match = named.match(path.name)
        if match is None:
            continue
        step = int(match.group(1))
        if last_step is not None and step > last_step:
            continue
        if step not in rows:
            raise InspectError(f"{path}: the run logged no step {step} with time/train_s")
        result = json.loads(path.read_text())
        scored = Path(result.get("weights_from") or f"step_{step}").name
        if scored != f"step_{step}":
            raise InspectError(f"{path}: named step {step}, but `sao eval` scored {scored}")
        points[step] = float(result["paired_difference"]["difference"])
    if len(points) == 1:
        upto = "" if last_step is None else f" up to step {last_step}"
        raise InspectError(f"{run_dir}: no eval matches {pattern!r}{upto}")
    steps = sorted(points)
    return Curve(
        tuple(pretrain + float(rows[s]["time/train_s"]) for s in steps),
        tuple(float(rows[s].get("rollout/trajectories_sampled", 0)) for s in steps),
        tuple(points[s] for s in steps),
    )


def _eval_curve(spec: str, pattern: str) -> Curve:
    """`RUN` or `RUN@LAST_STEP` read by `read_eval_curve`."""
    path, sep, last = spec.rpartition("@")
    if not sep:
        return read_eval_curve(Path(spec), pattern)
    if not last.isdigit():
        raise InspectError(f"{spec}: expected RUN@STEP with a whole step after '@'")
    return read_eval_curve(Path(path), pattern, int(last))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--candidate", required=True, help="comma-separated run dirs, by seed")
    parser.add_argument("--reference", required=True, help="comma-separated run dirs, by seed")
    parser.add_argument(
        "--evals",
        metavar="PATTERN",
        help="curves from saved evals RUN/PATTERN ({step} for the step), accuracy = paired gain; "
        "a run given as RUN@N stops at step N",
    )


def _curve(run: Path) -> Curve:
    try:
        return read_curve(run)
    except MissingMetric as err:
        raise InspectError(str(err)) from None


def run(args: argparse.Namespace) -> int:
    candidates = [Path(p) for p in args.candidate.split(",") if p]
    references = [Path(p) for p in args.reference.split(",") if p]
    if len(candidates) != len(references):
        raise InspectError(f"{len(candidates)} candidate runs but {len(references)} reference runs")
    print(
        "| seed | target | candidate s | reference s | ratio | bracket | candidate traj "
        "| reference traj | candidate final | end s (cand / ref) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios: list[float | None] = []
    brackets: list[tuple[float, float | None] | None] = []
    for seed, (cand, ref) in enumerate(zip(candidates, references, strict=True)):
        if args.evals:
            row = seed_row(_eval_curve(str(cand), args.evals), _eval_curve(str(ref), args.evals))
        else:
            row = seed_row(_curve(cand), _curve(ref))
        ratios.append(row["ratio"] if isinstance(row["ratio"], float) else None)
        brackets.append(row["bracket"] if isinstance(row["bracket"], tuple) else None)
        ratio = _fmt(row["ratio"], ".2f") + (f" ({row['reason']})" if row["reason"] else "")
        print(
            f"| {seed} | {row['target']:.3f} | {_fmt(row['candidate_s'])} | "
            f"{_fmt(row['reference_s'])} | {ratio} | {_bracket(brackets[-1])} | "
            f"{_fmt(row['candidate_traj'], '.0f')} | "
            f"{_fmt(row['reference_traj'], '.0f')} | {row['candidate_final']:.3f} | "
            f"{row['candidate_end_s']:.0f} / {row['reference_end_s']:.0f} |"
        )
    print(rule_line(ratios, brackets))
    return 0
