"""`sao inspect edit-credit`: where token-level GAE puts the credit for a code_repair fix: the mean
actor advantage on the first tokens of each `replace`, by what the test right after it showed,
under several lambdas, from one critic on the same trajectories.

    sao inspect edit-credit runs/code_repair_sao --from-step 20 --to-step 40 --lambdas 0.95 1 adaptive

The critic is the run's own at checkpoint `--from-step`; the trajectories are those the learner
trained at steps `--from-step` + 1 to `--to-step` (the checkpoints' `trained_indices`), so the
values are those of a critic a few steps older than the one that trained on them. A `replace`'s
first tokens (`--head`) hold the line number and the new line's indentation, where the edit is
decided; whether it was right is seen only in the test's output after it, which the critic reads
one action later. `adaptive` is the ports' length-adaptive lambda, `1 - 1 / (alpha * L)`
(`algo.adaptive_lambda_alpha`, 1.5 when the run did not set it).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sao.analysis.runs import InspectError, run_config, trajectories

if TYPE_CHECKING:
    import torch

OUTCOMES = {
    "test_passed": "replace, then its test passed",
    "test_failed": "replace, then its test failed",
}


def replace_labels(events: Sequence[str]) -> list[str | None]:
    """Per action, its label when it is a `replace` followed by a `test`, else None."""
    labels: list[str | None] = [None] * len(events)
    for j, event in enumerate(events[:-1]):
        if event == "replace" and events[j + 1] in OUTCOMES:
            labels[j] = OUTCOMES[events[j + 1]]
    return labels


def head_means(
    advantages: torch.Tensor, action_mask: torch.Tensor, events: Sequence[str], head: int
) -> list[tuple[str, float]] | None:
    """`(label, mean advantage over the first `head` tokens)` for each labelled `replace` of one
    trajectory (`[T]` rows); None when its action spans do not match its events one to one."""
    from sao.core.advantages import action_steps

    spans = action_steps(action_mask)
    if len(spans) != len(events):
        return None
    out = []
    for (start, end), label in zip(spans, replace_labels(events), strict=True):
        if label is not None:
            out.append((label, float(advantages[start : min(end, start + head)].mean())))
    return out


def _mean_sd(values: list[float]) -> str:
    mean = sum(values) / len(values)
    if len(values) < 2:
        return f"{mean:+.3f}"
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    return f"{mean:+.3f} +- {sd:.3f}"


def describe(results: dict[str, dict[str, list[float]]]) -> list[str]:
    """A markdown table: one row per label, one column per lambda (mean +- SD over the edits,
    and n)."""
    lambdas = list(results)
    labels = sorted({label for per in results.values() for label in per})
    lines = ["| edit | " + " | ".join(f"lambda {lam}" for lam in lambdas) + " |"]
    lines.append("|---|" + "---|" * len(lambdas))
    for label in labels:
        cells = []
        for lam in lambdas:
            values = results[lam].get(label, [])
            cells.append(f"{_mean_sd(values)} (n={len(values)})" if values else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def measure(
    run: Path, first: int, last: int, lambdas: Sequence[str], head: int
) -> dict[str, dict[str, list[float]]]:
    """`{lambda: {label: [head means]}}` over the window's trajectories."""
    import torch

    from sao.config import load_run_config
    from sao.core.advantages import adaptive_lambda, token_gae
    from sao.models.critic import ValueModel
    from sao.models.policy import load_policy
    from sao.runtime.checkpoints import checkpoint_root, load_checkpoint
    from sao.trajectory import collate

    run_config(run)  # a missing config.yaml is named before anything loads
    config = load_run_config(run)
    policy, tokenizer = load_policy(run / "policy")
    critic = ValueModel.from_policy(policy)
    state, before = load_checkpoint(checkpoint_root(run) / f"step_{first}")
    _, after = load_checkpoint(checkpoint_root(run) / f"step_{last}")
    critic.load_state_dict(state["critic"])
    critic.eval()
    by_index = {t.metadata["index"]: t for t in trajectories(run)}
    window = after.trained_indices[len(before.trained_indices) :]
    window_trajectories = [by_index[i] for i in window]
    alpha = config.algo.adaptive_lambda_alpha or 1.5
    results: dict[str, dict[str, list[float]]] = {lam: defaultdict(list) for lam in lambdas}
    with torch.no_grad():
        for start in range(0, len(window_trajectories), 16):
            chunk = window_trajectories[start : start + 16]
            batch = collate(chunk, tokenizer.pad_token_id or 0)
            values = critic(batch.input_ids, batch.attention_mask)
            for lam in lambdas:
                lam_value: Any = (
                    adaptive_lambda(batch.action_mask.sum(dim=1), alpha)
                    if lam == "adaptive"
                    else float(lam)
                )
                advantages, _ = token_gae(
                    batch.rewards, values, batch.action_mask, config.algo.gamma, lam_value
                )
                for row, trajectory in enumerate(chunk):
                    events = trajectory.metadata["info"]["events"]
                    means = head_means(advantages[row], batch.action_mask[row], events, head)
                    for label, mean in means or []:
                        results[lam][label].append(mean)
    return results


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path)
    parser.add_argument("--from-step", type=int, default=20)
    parser.add_argument("--to-step", type=int, default=40)
    parser.add_argument("--lambdas", nargs="+", default=["0.95", "1", "adaptive"])
    parser.add_argument("--head", type=int, default=8)


def run(args: argparse.Namespace) -> int:
    for lam in args.lambdas:
        if lam != "adaptive" and not _is_number(lam):
            raise InspectError(f"--lambdas: {lam!r} is neither a number nor 'adaptive'")
    from sao.runtime.checkpoints import checkpoint_root

    for step in (args.from_step, args.to_step):
        if not (checkpoint_root(args.run) / f"step_{step}").is_dir():
            raise InspectError(f"{checkpoint_root(args.run) / f'step_{step}'}: no such checkpoint")
    results = measure(args.run, args.from_step, args.to_step, args.lambdas, args.head)
    print(f"{args.run}, steps {args.from_step + 1}-{args.to_step}, first {args.head} tokens:")
    print("\n".join(describe(results)))
    return 0
