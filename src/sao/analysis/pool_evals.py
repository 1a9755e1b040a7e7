"""`sao inspect pool`: `sao eval --baseline ... --json FILE` results of several seeds, pooled on the
same held-out tasks.

Every policy of a preset is scored on the same tasks (the same `--n` and `--seed`), so the seeds
are not independent samples of tasks: the pooled gain averages each task's paired difference over
the seeds first, and the interval is over tasks. Each group is `LABEL=EVAL_JSON[,EVAL_JSON...]`:

    sao inspect pool grpo=runs/cr_grpo128fix/s0/eval400.json,runs/cr_grpo128fix/s1/eval400.json

`--versus A B` also prints group A's pooled pass@1 minus group B's on the same tasks (both groups
scored with the same `--n` and `--seed`): each task's score is averaged over a group's seeds, so
the interval is over tasks and does not count how much training runs differ from seed to seed.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sao.analysis.runs import InspectError, eval_result, groups
from sao.evaluation.stats import paired_difference


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("groups", nargs="+", help="LABEL=EVAL_JSON[,EVAL_JSON...]")
    parser.add_argument(
        "--versus",
        nargs=2,
        action="append",
        default=[],
        metavar=("A", "B"),
        help="also print group A's pass@1 minus group B's on the same tasks (repeatable)",
    )


def load_eval(path: Path) -> dict[str, Any]:
    """One `sao eval --json` result; it must hold a baseline scored on the same tasks."""
    result = eval_result(path)
    if "baseline" not in result:
        raise InspectError(f"{path}: no baseline in this eval (run `sao eval` with --baseline)")
    return result


def _paired_task_means(model: list[list[float]], reference: list[list[float]]) -> dict[str, Any]:
    """`sao.evaluation.stats.paired_difference` of each task's score averaged over the `model` score
    lists against the same average over the `reference` lists: the interval is over tasks."""
    lengths = {len(scores) for scores in model + reference}
    if len(lengths) != 1:
        raise InspectError(f"evals cover different numbers of tasks: {sorted(lengths)}")

    def averaged(scores: list[list[float]]) -> list[float]:
        return [sum(task) / len(task) for task in zip(*scores, strict=True)]

    try:
        return paired_difference(averaged(model), averaged(reference))
    except ValueError as err:
        raise InspectError(str(err)) from None


def pooled_gain(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each task's score averaged over the results against its baseline score averaged the same
    way: the interval is over tasks, not seeds x tasks."""
    return _paired_task_means(
        [r["task_scores"] for r in results], [r["baseline"]["task_scores"] for r in results]
    )


def preset_difference(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> dict[str, Any]:
    """The first group's per-task pass@1 (averaged over its seeds) against the second's, on the
    same held-out tasks."""
    return _paired_task_means([r["task_scores"] for r in first], [r["task_scores"] for r in second])


def row(label: str, paths: list[Path]) -> str:
    """One markdown row: per-seed paired gains, the pooled gain, accuracies, format errors and
    episodes that hit the turn limit."""
    results = [load_eval(p) for p in paths]
    pooled = pooled_gain(results)
    low, high = pooled["difference_ci95"]
    per_seed = ", ".join(f"{r['paired_difference']['difference']:+.3f}" for r in results)
    accuracy = ", ".join(f"{r['accuracy']:.3f}" for r in results)
    baseline = ", ".join(f"{r['baseline']['accuracy']:.3f}" for r in results)
    formats = ", ".join(f"{r['format_error_rate']:.3f}" for r in results)
    turn_limit = ", ".join(str(r["end_reasons"].get("max_turns", 0)) for r in results)
    episodes = results[0]["n"] * results[0].get("samples", 1)
    return (
        f"| `{label}` | {len(results)} | {baseline} | {accuracy} | {per_seed} | "
        f"**{pooled['difference']:+.3f}** ({low:+.3f}, {high:+.3f}), {pooled['n']} tasks | "
        f"{formats} | {turn_limit} of {episodes} |"
    )


def run(args: argparse.Namespace) -> int:
    parsed = groups(args.groups, "EVAL_JSON")
    labels = dict(parsed)
    for pair in args.versus:
        missing = [label for label in pair if label not in labels]
        if missing:
            raise InspectError(
                f"--versus: no group labelled {missing[0]!r} (have {sorted(labels)})"
            )
    rows = [row(label, paths) for label, paths in parsed]
    print(
        "| preset | seeds | baseline pass@1 | pass@1 | paired gain per seed | pooled paired gain "
        "(95% CI) | format errors | episodes at the turn limit |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    for first, second in args.versus:
        diff = preset_difference(
            [load_eval(p) for p in labels[first]], [load_eval(p) for p in labels[second]]
        )
        low, high = diff["difference_ci95"]
        print(
            f"`{first}` - `{second}`, same tasks: {diff['difference']:+.3f} "
            f"({low:+.3f}, {high:+.3f}), {diff['n']} tasks"
        )
    return 0
