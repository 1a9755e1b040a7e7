"""`sao inspect critic-ceiling oracle`: what explained variance would a perfect critic reach on an
environment, for one fixed policy?

`critic/vf_explained_var` compares a critic's values with Monte-Carlo returns, pooled over action
tokens. The best any critic can do at action token `t` is the true value `V*(s_t) = E[G_t | s_t]`
(the state: every token before `t`), and its error there is the variance of the return that is
still to be decided, `Var(G_t | s_t)`. So the best pooled explained variance is

    EV* = 1 - E_t[ Var(G_t | s_t) ] / Var(G_t)        (both over action tokens)

whatever the critic's size or training. This measures it without any critic: it samples
trajectories from the policy, picks `--probes` action tokens of each at random, and from each
picked token's prefix samples `--continuations` fresh endings with the same policy, its tool and
its environment replayed up to that turn (the recorded observations are checked to come back
identical). The endings' unbiased return variance estimates `Var(G_t | s_t)`; each trajectory's
probes stand for all its action tokens. An interval comes from resampling trajectories.

Beside it, the same estimate by where the probed token lies in its trajectory (quarters of its
action tokens; there each probe counts alike, where the pooled figure weighs each trajectory by
its tokens), with `Var(G_t)` as the denominator throughout: it shows when the outcome is
decided. With `--checkpoint` (a run's `checkpoints/step_N`) the policy and critic are the
checkpoint's, and the critic's own explained variance on the same trajectories is reported
beside the ceiling, measured as the learner measures it. Example (calc, the warm start, a default
run at step 40, and its final policy):

    sao inspect critic-ceiling oracle --policy checkpoints/warm_start_calc --trajectories 256
    sao inspect critic-ceiling oracle --policy checkpoints/warm_start_calc --checkpoint runs/calc_sao/checkpoints/step_40
    sao inspect critic-ceiling oracle --policy runs/calc_sao/policy --trajectories 256

A run logs explained variance per batch of trajectories, so its denominator is a batch's variance,
a little smaller on average than the population's used here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sao.analysis.runs import InspectError

if TYPE_CHECKING:
    import torch

    from sao.config import SAOConfig
    from sao.models.critic import ValueModel
    from sao.trajectory import Trajectory

_SEED_OFFSET = 211_811
QUARTERS = ("0-25%", "25-50%", "50-75%", "75-100%")


@dataclass(frozen=True)
class Probe:
    """The endings sampled from one action token's prefix.

    Attributes:
        trajectory: index of the trajectory probed.
        quarter: where the token lies among the trajectory's action tokens, 0-3.
        returns: the return from the token of each ending.
    """

    trajectory: int
    quarter: int
    returns: tuple[float, ...]


def sample_variance(xs: Sequence[float]) -> float:
    """Unbiased variance (n - 1 in the denominator)."""
    n = len(xs)
    if n < 2:
        raise ValueError("sample_variance: need at least 2 values")
    mean = sum(xs) / n
    return sum((x - mean) ** 2 for x in xs) / (n - 1)


def oracle_explained_variance(
    token_returns: Sequence[Sequence[float]], probes: Sequence[Probe]
) -> dict[str, Any]:
    """`EV*` pooled over action tokens, and by quarter, from each trajectory's per-action-token
    returns and the probes of its tokens.

    A trajectory's probes average to its mean `Var(G_t | s_t)`, which stands for all its tokens;
    trajectories without a probe are left out of the error (not of `Var(G_t)`)."""
    pooled = [g for returns in token_returns for g in returns]
    if len(pooled) < 2:
        raise ValueError("oracle_explained_variance: need at least 2 action tokens")
    mean = sum(pooled) / len(pooled)
    returns_var = sum((g - mean) ** 2 for g in pooled) / len(pooled)
    by_trajectory: dict[int, list[float]] = {}
    by_quarter: dict[int, list[float]] = {q: [] for q in range(len(QUARTERS))}
    for probe in probes:
        residual = sample_variance(probe.returns)
        by_trajectory.setdefault(probe.trajectory, []).append(residual)
        by_quarter[probe.quarter].append(residual)
    if not by_trajectory:
        raise ValueError("oracle_explained_variance: no probes")
    weights = {i: len(token_returns[i]) for i in by_trajectory}
    error_var = sum(weights[i] * sum(v) / len(v) for i, v in by_trajectory.items()) / sum(
        weights.values()
    )

    def ev(error: float) -> float:
        return 1.0 - error / returns_var if returns_var > 0 else math.nan

    return {
        "ev_oracle": ev(error_var),
        "returns_var": returns_var,
        "error_var": error_var,
        "by_quarter": {
            name: ev(sum(v) / len(v)) if v else math.nan
            for name, v in zip(QUARTERS, by_quarter.values(), strict=True)
        },
    }


def bootstrap_interval(
    token_returns: Sequence[Sequence[float]],
    probes: Sequence[Probe],
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """95% interval of `EV*` from resampling trajectories (with their probes) with replacement."""
    rng = random.Random(seed)
    by_trajectory: dict[int, list[Probe]] = {}
    for probe in probes:
        by_trajectory.setdefault(probe.trajectory, []).append(probe)
    n = len(token_returns)
    values = []
    for _ in range(resamples):
        picked = [rng.randrange(n) for _ in range(n)]
        returns = [token_returns[i] for i in picked]
        renamed = [
            dataclasses.replace(p, trajectory=k)
            for k, i in enumerate(picked)
            for p in by_trajectory.get(i, [])
        ]
        if renamed:
            values.append(oracle_explained_variance(returns, renamed)["ev_oracle"])
    values.sort()
    return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]


def replay_gap(
    endings: dict[tuple[int, int, int], list[float]],
    recorded: dict[tuple[int, int, int], float],
    action_tokens: Sequence[int],
) -> dict[str, Any]:
    """The check that makes the ceiling a ceiling: endings sampled from a recorded trajectory's
    prefix must return, on average, what the recorded trajectory itself returned from the same
    token (it is one more ending of that prefix). `replay_gap` is the endings' mean minus the
    recorded return, pooled over action tokens as the ceiling is: each trajectory's probes stand
    for its `action_tokens[i]` tokens, with a 95% interval over trajectories; one that excludes 0
    means the endings are not drawn as the recorded episodes were, or (one draw in twenty) that
    the recordings are an unusual draw, and either way the ceiling computed from them cannot be
    trusted.

    Pooling over tokens is what centres the check on 0: `E[G_t - V(s_t) | s_t] = 0` at every token,
    so the sum over tokens has mean 0. Averaging each trajectory's probes with equal weight per
    trajectory would weigh a token by one over its trajectory's length, which the recorded
    ending decides: where failing endings run longer than succeeding ones, that favours the
    recorded successes and shows a gap below 0 with nothing wrong in the endings.

    The interval is the wider of two: the spread of the trajectories' gaps as measured, and the
    spread the gaps would have if the recordings were drawn as the endings are (`null_variance`).
    The first alone is blind to an outcome the recordings happen to lack: recordings that all
    succeeded, where one ending in ten fails, give gaps of the endings' noise only and an
    interval that excludes 0 on a draw that is merely lucky. The endings, many per recording,
    see that outcome."""
    per_trajectory: dict[int, list[float]] = {}
    spreads: dict[int, list[tuple[float, int]]] = {}
    for key, returns in endings.items():
        gap = sum(returns) / len(returns) - recorded[key]
        per_trajectory.setdefault(key[0], []).append(gap)
        spread = sample_variance(returns) if len(returns) > 1 else 0.0
        spreads.setdefault(key[0], []).append((spread, len(returns)))
    if len(per_trajectory) < 2:
        return {"replay_gap": math.nan, "replay_gap_95": [math.nan, math.nan]}
    weights = [action_tokens[i] for i in per_trajectory]
    sums = [w * sum(v) / len(v) for w, v in zip(weights, per_trajectory.values(), strict=True)]
    total = sum(weights)
    mean = sum(sums) / total
    # A ratio of sums over trajectories: its variance from each trajectory's residual.
    k = len(sums)
    residuals = [s - mean * w for s, w in zip(sums, weights, strict=True)]
    measured = k / (k - 1) * sum(r * r for r in residuals)
    expected = sum(action_tokens[i] ** 2 * null_variance(spreads[i]) for i in per_trajectory)
    half = 1.96 * math.sqrt(max(measured, expected)) / total
    return {"replay_gap": mean, "replay_gap_95": [mean - half, mean + half]}


def null_variance(probes: Sequence[tuple[float, int]]) -> float:
    """The variance of one trajectory's gap (its probes' mean of endings' mean minus recorded
    return) if the recording is one more ending at each probe, from each probe's endings'
    sample variance `s2` and count `m`. The recorded returns at one trajectory's probes share an
    ending, so the standard deviation of their mean is at most the mean of theirs, `sqrt(s2)`
    each; the endings' means are independent, `s2 / m` each. (Bounding by the mean of `s2`
    instead would count a probe after the outcome was decided, `s2 = 0`, as if it diluted an
    independent draw, and widen the check past 95%: the unit tests simulate such episodes.)"""
    n = len(probes)
    recorded = (sum(math.sqrt(s2) for s2, _ in probes) / n) ** 2
    endings = sum(s2 / m for s2, m in probes) / (n * n)
    return recorded + endings


def tool_errors_per_call(trajectories: Sequence[Trajectory]) -> float:
    """Failed tool calls (timeouts, crashes: the environment's `tool_error`) over tool calls; an
    ending counts only the calls made after its prefix. NaN without a tool call."""
    calls = sum(t.metadata.get("tool_calls", 0) for t in trajectories)
    errors = sum(t.metadata.get("tool_errors", 0) for t in trajectories)
    return errors / calls if calls else math.nan


def action_positions(trajectory: Trajectory) -> list[int]:
    return [i for i, m in enumerate(trajectory.action_mask) if m]


def critic_report(
    critic: ValueModel,
    trajectories: Sequence[Trajectory],
    gamma: float,
    pad_token_id: int,
    token_name: Callable[[int], str],
) -> dict[str, Any]:
    """The critic's explained variance of Monte-Carlo returns over the trajectories' action tokens
    (the learner's measure), and by quarter of each trajectory's action tokens with the pooled
    `Var(G_t)` as the denominator, as the ceiling's quarters have it."""
    import torch

    from sao.core.advantages import token_gae
    from sao.core.metrics import explained_variance
    from sao.trajectory import collate

    batch = collate(list(trajectories), pad_token_id)
    with torch.no_grad():
        values = critic(batch.input_ids, batch.attention_mask)
    mask = batch.action_mask
    _, returns = token_gae(batch.rewards, torch.zeros_like(values), mask, gamma)
    m = mask > 0
    pooled_var = returns[m].double().var(unbiased=False)
    rank = mask.cumsum(dim=1) - 1
    quarter = rank * len(QUARTERS) // mask.sum(dim=1, keepdim=True)
    by_quarter = {}
    for q, name in enumerate(QUARTERS):
        errors = (returns - values)[m & (quarter == q)].double()
        undefined = pooled_var <= 0 or len(errors) == 0
        by_quarter[name] = (
            math.nan if undefined else float(1 - errors.var(unbiased=False) / pooled_var)
        )
    return {
        "critic_ev": explained_variance(values, returns, mask),
        "critic_by_quarter": by_quarter,
        "by_first_action_token": by_first_action_token(trajectories, values, token_name),
    }


def by_first_action_token(
    trajectories: Sequence[Trajectory], values: torch.Tensor, token_name: Callable[[int], str]
) -> dict[str, dict[str, float]]:
    """Per first action token id (the policy's opening move, e.g. a tool call or an answer), of
    the trajectories that open with it: how many, their mean outcome, and the critic's mean value
    over their later action tokens (what it learnt of that opening)."""
    groups: dict[int, list[tuple[float, float]]] = {}
    for row, trajectory in enumerate(trajectories):
        positions = action_positions(trajectory)
        later = values[row, positions[1:]]
        value = float(later.mean()) if len(later) else math.nan
        opening = trajectory.token_ids[positions[0]]
        groups.setdefault(opening, []).append((trajectory.reward, value))
    return {
        token_name(token): {
            "n": len(rows),
            "reward_mean": sum(r for r, _ in rows) / len(rows),
            "critic_value_mean": sum(v for _, v in rows) / len(rows),
        }
        for token, rows in sorted(groups.items(), key=lambda kv: -len(kv[1]))
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", required=True, help="policy directory")
    parser.add_argument("--env", default="calc")
    parser.add_argument("--preset", default="sao")
    parser.add_argument("--trajectories", type=int, default=256)
    parser.add_argument("--probes", type=int, default=4, help="action tokens probed per trajectory")
    parser.add_argument("--continuations", type=int, default=8, help="endings per probe")
    parser.add_argument(
        "--checkpoint",
        help="a run's checkpoints/step_N: its policy and critic (--policy then gives the "
        "architecture and tokenizer, e.g. the run's warm start)",
    )
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    check_counts(args.trajectories, args.probes, args.continuations)
    from sao.config import load_config
    from sao.preflight import check_policy_dir

    check_policy_dir(args.policy, "--policy")
    config = load_config(
        args.preset,
        overrides=[f"env.name={args.env}", f"train.seed={args.seed}", f"model.path={args.policy}"],
    )
    result = measure(
        config, args.policy, args.checkpoint, args.trajectories, args.probes, args.continuations
    )
    print(json.dumps({"policy": args.policy, "checkpoint": args.checkpoint, **result}))
    return 0


def check_counts(trajectories: int, probes: int, continuations: int) -> None:
    """Refuse sample counts the estimate cannot be made from, before anything loads."""
    if continuations < 2 or probes < 1 or trajectories < 8:
        raise InspectError("--continuations must be >= 2, --probes >= 1 and --trajectories >= 8")


def measure(
    config: SAOConfig,
    policy_path: str | Path,
    checkpoint: str | Path | None,
    trajectories: int,
    probes: int,
    continuations: int,
) -> dict[str, Any]:
    """The oracle's ceiling (and, with a `checkpoint`, that checkpoint's critic beside it) for the
    policy at `policy_path` (or the checkpoint's) on `config`'s environment, seeded by
    `config.train.seed`."""
    import torch

    from sao.envs.registry import make_task_source
    from sao.learner.value_pretrain import monte_carlo_returns
    from sao.models.critic import ValueModel
    from sao.models.policy import load_policy
    from sao.rollout.prefix_loop import PrefixAgentLoop, prefix_at
    from sao.rollout.setup import build_agent_loop
    from sao.runtime.checkpoints import load_checkpoint

    seed = config.train.seed
    torch.manual_seed(seed)
    rng = random.Random(seed)
    try:
        policy, tokenizer = load_policy(policy_path)
        critic = None
        if checkpoint:
            state, _ = load_checkpoint(Path(checkpoint))
            if state.get("critic") is None:
                raise ValueError(f"{checkpoint}: the run trained no critic")
            policy.load_state_dict(state["policy"])
            critic = ValueModel.from_policy(policy)
            critic.load_state_dict(state["critic"])
            critic.eval()
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        raise InspectError(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
    tasks = make_task_source(config.env.name, **config.env.task_options).train(
        trajectories, seed + _SEED_OFFSET
    )
    started = time.perf_counter()
    loop = build_agent_loop(config, policy, tokenizer, seed=seed + _SEED_OFFSET)
    try:
        recorded = loop.run([(f"t{i}", task, {"task": i}) for i, task in enumerate(tasks)])
        recorded.sort(key=lambda t: int(t.metadata["task"]))
        prefix_loop = PrefixAgentLoop(
            loop.engine,
            tokenizer,
            loop.env_factory,
            loop.sampling,
            max_tokens=loop.max_tokens,
            env_name=loop.env_name,
        )

        def decode(ids: list[int]) -> str:
            return tokenizer.decode(ids, skip_special_tokens=False)

        jobs, where = [], {}
        for i, trajectory in enumerate(recorded):
            positions = action_positions(trajectory)
            for p, cut in enumerate(sorted(rng.sample(positions, min(probes, len(positions))))):
                quarter = min(positions.index(cut) * 4 // len(positions), 3)
                for c in range(continuations):
                    episode_id = f"t{i}-p{p}-c{c}"
                    prefix_loop.prefixes[episode_id] = prefix_at(trajectory, cut, decode)
                    where[episode_id] = (i, quarter, cut)
                    task = tasks[int(trajectory.metadata["task"])]
                    jobs.append((episode_id, task, {"probe": episode_id}))
        try:
            endings = prefix_loop.run(jobs)
        except (ValueError, RuntimeError) as err:
            raise InspectError(str(err)) from None
    finally:
        loop.close()
    sampled_s = time.perf_counter() - started

    gamma, pad = config.algo.gamma, tokenizer.pad_token_id
    token_returns = []
    for trajectory in recorded:
        returns = monte_carlo_returns(trajectory, gamma).tolist()
        token_returns.append([returns[t] for t in action_positions(trajectory)])
    grouped: dict[tuple[int, int, int], list[float]] = {}
    for ending in endings:
        i, quarter, cut = where[ending.metadata["probe"]]
        grouped.setdefault((i, quarter, cut), []).append(
            float(monte_carlo_returns(ending, gamma)[cut])
        )
    probed = [Probe(i, q, tuple(r)) for (i, q, _), r in grouped.items() if len(r) >= 2]
    result = oracle_explained_variance(token_returns, probed)
    recorded_at = {
        key: float(monte_carlo_returns(recorded[key[0]], gamma)[key[2]]) for key in grouped
    }
    result |= replay_gap(grouped, recorded_at, [len(r) for r in token_returns])
    if critic is not None:
        result |= critic_report(critic, recorded, gamma, pad, tokenizer.convert_ids_to_tokens)
    # A check on the replay: endings drawn from the policy's own prefixes succeed, on average,
    # as often as the recorded trajectories did.
    result["ending_return_mean"] = {
        name: sum(sum(p.returns) / len(p.returns) for p in probed if p.quarter == q)
        / max(sum(p.quarter == q for p in probed), 1)
        for q, name in enumerate(QUARTERS)
    }
    # Endings run many more episodes at once than the recordings did: a tool with a wall-clock
    # limit failing more often under that load would show here (it did not explain calc's gap).
    result["tool_errors_per_call"] = {
        "recorded": tool_errors_per_call(recorded),
        "endings": tool_errors_per_call(endings),
    }
    low, high = bootstrap_interval(token_returns, probed, seed=seed)
    return {
        "env": config.env.name,
        "trajectories": len(recorded),
        "reward_mean": sum(t.reward for t in recorded) / len(recorded),
        "action_tokens_mean": sum(map(len, token_returns)) / len(token_returns),
        "probes": len(probed),
        "endings": len(endings),
        "sampled_s": round(sampled_s, 1),
        **result,
        "ev_oracle_95": [low, high],
    }
