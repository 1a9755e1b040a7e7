"""Held-out evaluation (`sao eval`): sampled pass@1 with a confidence interval.

Pass@1 is measured by *sampling* at the rollout temperature and averaging, as the paper's Pass@1
is: greedy decoding collapses onto a teacher's majority behaviour and hides its imperfections.
`--samples K` averages K samples per task; `--baseline B` scores a second policy on the same tasks
and reports the per-task (paired) difference, which cancels the tasks' own difficulty from the
comparison instead of counting it as noise twice.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import SAOConfig
from sao.envs.registry import make_task_source
from sao.evaluation.scores_file import scored_under
from sao.evaluation.stats import accuracy_interval, paired_difference
from sao.plumbing.durable import strict_dumps
from sao.rollout.setup import build_agent_loop
from sao.warmstart.record import stale_warning

_EVAL_MAX_BATCH = 64


def evaluate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    config: SAOConfig,
    n: int,
    *,
    seed: int,
    version: int = 0,
    samples: int = 1,
    progress: bool = False,
) -> dict[str, Any]:
    """Sample `samples` trajectories for each of `n` held-out tasks of `config`'s environment.

    Sampling, budgets and environment options are `config`'s, through the same
    `build_agent_loop` that training uses; the latency overlay only with `env.latency.in_evals`.

    Returns:
        `accuracy` (mean reward), `accuracy_ci95` (Wilson with one sample per task, else a
        normal interval over the task means),
        `task_scores` (each task's mean reward, in task order, for paired comparisons),
        `mean_turns`, `tool_call_rate` (share of trajectories that called a tool),
        `format_error_rate` (share with a malformed action), `end_reasons`, `env_errors`, `n`
        (tasks) and `samples`.
    """
    if samples < 1:
        raise ValueError(f"samples: must be >= 1, got {samples}")
    env = config.env.name
    tasks = make_task_source(env, **config.env.task_options).test(n, seed)
    loop = build_agent_loop(
        config,
        model,
        tokenizer,
        seed=seed,
        version=version,
        max_batch=_EVAL_MAX_BATCH,
        for_training=False,
        latency=config.env.latency.in_evals,
    )
    try:
        episodes = [
            (f"eval-{i}-{k}", task, {"task_index": i})
            for i, task in enumerate(tasks)
            for k in range(samples)
        ]
        with tqdm(
            total=len(episodes), desc=f"eval {env}", disable=not progress, dynamic_ncols=True
        ) as bar:
            trajectories = loop.run(episodes, on_finished=bar.update)
    finally:
        loop.close()
    count = len(trajectories)
    rewards = [t.reward for t in trajectories]
    per_task: list[list[float]] = [[] for _ in tasks]
    for t in trajectories:
        per_task[t.metadata["task_index"]].append(t.reward)
    task_scores = [sum(r) / len(r) if r else 0.0 for r in per_task]
    end_reasons: dict[str, int] = {}
    for t in trajectories:
        reason = str(t.metadata["end_reason"])
        end_reasons[reason] = end_reasons.get(reason, 0) + 1
    accuracy = sum(rewards) / max(1, count)
    return {
        "accuracy": accuracy,
        "accuracy_ci95": list(accuracy_interval(rewards, task_scores, samples)),
        "task_scores": task_scores,
        "mean_turns": sum(t.metadata["turns"] for t in trajectories) / max(1, count),
        "tool_call_rate": sum(t.metadata["tool_calls"] > 0 for t in trajectories) / max(1, count),
        "format_error_rate": sum(t.metadata["format_errors"] > 0 for t in trajectories)
        / max(1, count),
        "end_reasons": end_reasons,
        "env_errors": loop.env_errors,
        "n": len(tasks),
        "samples": samples,
    }


def _summary_line(name: str, result: dict[str, Any]) -> str:
    lo, hi = result["accuracy_ci95"]
    per_task = f" x {result['samples']} samples" if result["samples"] > 1 else ""
    return (
        f"{name}: pass@1 {result['accuracy']:.3f} (95% CI {lo:.3f}-{hi:.3f}, "
        f"n={result['n']}{per_task}), mean turns {result['mean_turns']:.2f}, "
        f"tool-call rate {result['tool_call_rate']:.3f}, "
        f"format-error rate {result['format_error_rate']:.3f}"
    )


def run_eval_command(
    config: SAOConfig,
    model: str | Path,
    n: int,
    json_path: str | None,
    seed: int,
    samples: int = 1,
    baseline: str | Path | None = None,
    weights: dict[str, Any] | None = None,
    weights_from: str | None = None,
    baseline_scores: dict[str, Any] | None = None,
    baseline_scores_from: str | None = None,
) -> int:
    """`sao eval`: score a saved policy (and a baseline) under `config`; print, maybe write JSON.

    With `weights` (a policy `state_dict`, e.g. a run's checkpoint, named by `weights_from` in
    the result), the policy scored is `model` with those weights: `model` then only supplies
    the architecture and tokenizer. `baseline_scores` (an earlier eval's, checked by
    `sao.evaluation.scores_file.reusable_scores`; read from `baseline_scores_from`) stand in for
    scoring `baseline` again. Each result records what its scores depend on under `scored`.
    The caller has checked the paths (`sao.preflight`); nothing here runs before that.
    """
    from sao.models.lora import with_weights
    from sao.models.policy import load_policy

    env = config.env.name
    for path in (model, baseline):
        warning = None if path is None else stale_warning(Path(path), env, "sao eval")
        if warning:
            print(warning, file=sys.stderr)

    def score(path: str | Path, state: dict[str, Any] | None = None) -> dict[str, Any]:
        policy, tokenizer = load_policy(path)
        if state is not None:
            policy = with_weights(policy, state, config.model.lora)
        return evaluate(policy, tokenizer, config, n, seed=seed, samples=samples, progress=True)

    def record(path: str | Path) -> dict[str, Any]:
        return scored_under(config, path, n=n, seed=seed, samples=samples)

    result = {**score(model, weights), "scored": record(weights_from or model)}
    if weights_from is not None:
        result = {**result, "weights_from": weights_from}
    print(_summary_line(env, result))
    base = None
    if baseline_scores is not None:
        base = {**baseline_scores, "scores_from": baseline_scores_from}
        print(_summary_line(f"{env} baseline (scores of {baseline_scores_from})", base))
    elif baseline is not None:
        base = {**score(baseline), "scored": record(baseline)}
        print(_summary_line(f"{env} baseline", base))
    if base is not None:
        paired = paired_difference(result["task_scores"], base["task_scores"])
        lo, hi = paired["difference_ci95"]
        print(
            f"paired difference (model - baseline, same {n} tasks): {paired['difference']:+.3f} "
            f"(95% CI {lo:+.3f} to {hi:+.3f}); model better on {paired['better']} tasks, "
            f"baseline better on {paired['worse']}"
        )
        result = {**result, "baseline": base, "paired_difference": paired}
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(strict_dumps(result, indent=2) + "\n")
    return 0
