"""Held-out evaluation (`sao eval`): sampled pass@1 with a confidence interval.

Pass@1 is measured by *sampling* at the rollout temperature and averaging, as the paper's Pass@1
is: greedy decoding collapses onto a teacher's majority behaviour and hides its imperfections.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.envs.registry import make_env, make_task_source
from sao.rollout.agent_loop import AgentLoop
from sao.rollout.engine import RolloutEngine, SamplingParams


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (sound near 0 and 1, unlike the normal one)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def evaluate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    env: str = "calc",
    n: int = 200,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 96,
    max_tokens: int = 384,
    env_options: dict[str, Any] | None = None,
    task_options: dict[str, Any] | None = None,
    seed: int = 0,
    max_batch: int = 64,
    version: int = 0,
    env_workers: int = 4,
) -> dict[str, Any]:
    """Sample one trajectory for each of `n` held-out tasks and score them.

    Returns:
        `accuracy` (mean reward), `accuracy_ci95` (Wilson), `mean_turns`, `tool_call_rate`
        (share of trajectories that called a tool), `format_error_rate` (share with a malformed
        action), `end_reasons` and `n`.
    """
    options = env_options or {}
    tasks = make_task_source(env, **(task_options or {})).test(n, seed)
    engine = RolloutEngine(model, tokenizer, max_batch=max_batch, seed=seed, version=version)
    loop = AgentLoop(
        engine,
        tokenizer,
        lambda: make_env(env, **options),
        SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens),
        max_tokens=max_tokens,
        env_name=env,
        env_workers=env_workers,
    )
    try:
        trajectories = loop.run([(f"eval-{i}", task, {}) for i, task in enumerate(tasks)])
    finally:
        loop.close()
    count = len(trajectories)
    rewards = [t.reward for t in trajectories]
    end_reasons: dict[str, int] = {}
    for t in trajectories:
        reason = str(t.metadata["end_reason"])
        end_reasons[reason] = end_reasons.get(reason, 0) + 1
    accuracy = sum(rewards) / max(1, count)
    return {
        "accuracy": accuracy,
        "accuracy_ci95": list(wilson_interval(sum(r > 0 for r in rewards), count)),
        "mean_turns": sum(t.metadata["turns"] for t in trajectories) / max(1, count),
        "tool_call_rate": sum(t.metadata["tool_calls"] > 0 for t in trajectories) / max(1, count),
        "format_error_rate": sum(t.metadata["format_errors"] > 0 for t in trajectories)
        / max(1, count),
        "end_reasons": end_reasons,
        "env_errors": loop.env_errors,
        "n": count,
    }


def run_eval_command(
    model: str, env: str, n: int, json_path: str | None, temperature: float | None, seed: int
) -> int:
    """`sao eval`: load a saved policy, evaluate it, print and optionally write JSON."""
    from sao.config import load_config
    from sao.models.policy import load_policy

    if not Path(model).exists():
        raise SystemExit(f"sao eval: --model {model} does not exist (run `sao sft` first?)")
    # The environment's packaged defaults (turn and token budgets, options) apply as in training.
    config = load_config("sao", None, [f"env.name={env}"])
    policy, tokenizer = load_policy(model)
    result = evaluate(
        policy,
        tokenizer,
        env,
        n,
        temperature=config.rollout.temperature if temperature is None else temperature,
        max_new_tokens=config.rollout.max_new_tokens,
        max_tokens=config.env.max_tokens,
        env_options={"max_turns": config.env.max_turns, **config.env.options},
        task_options=config.env.task_options,
        seed=seed,
    )
    lo, hi = result["accuracy_ci95"]
    print(
        f"{env}: pass@1 {result['accuracy']:.3f} (95% CI {lo:.3f}-{hi:.3f}, n={result['n']}), "
        f"mean turns {result['mean_turns']:.2f}, tool-call rate {result['tool_call_rate']:.3f}, "
        f"format-error rate {result['format_error_rate']:.3f}"
    )
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n")
    return 0
