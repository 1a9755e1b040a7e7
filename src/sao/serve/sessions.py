"""Sessions: a continued conversation continues the trajectory of the completion it extends.

A client continuing a chat resends the whole history. When the history's first `k` messages are
exactly an earlier request's messages followed by the reply the server gave it, the new turn
extends that earlier trajectory: its exact token ids (actions as sampled, with their log-probs and
versions) stay, the messages after position `k` are appended as observation tokens (mask 0), and
the new reply becomes the next action turn. Feedback on the newest completion then rewards the
whole multi-turn trajectory, and skip-observation GAE sees the user and tool turns as
observations. Without such a prefix the request starts a new trajectory from its rendered messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from transformers import PreTrainedTokenizerBase

from sao.rollout.requests import Completion
from sao.serve.chat_format import context_hash, render_ids
from sao.serve.store import StoredCompletion


@dataclass
class TurnContext:
    """The trajectory a new turn extends, and the prompt to sample the turn from."""

    parent_id: str | None
    token_ids: list[int]
    action_mask: list[int]
    rollout_logprobs: list[float]
    policy_versions: list[int]
    turn_spans: list[tuple[int, int]] = field(default_factory=list)

    @property
    def prompt_ids(self) -> list[int]:
        return self.token_ids

    def with_action(self, completion: Completion) -> dict[str, Any]:
        """The trajectory fields (no reward yet) once `completion` is appended as an action."""
        start = len(self.token_ids)
        n = len(completion.token_ids)
        return {
            "token_ids": [*self.token_ids, *completion.token_ids],
            "action_mask": [*self.action_mask, *[1] * n],
            "rollout_logprobs": [*self.rollout_logprobs, *completion.logprobs],
            "policy_versions": [*self.policy_versions, *completion.versions],
            "turn_spans": [*[list(s) for s in self.turn_spans], [start, start + n]],
        }


def _inserted(ids: list[int]) -> tuple[list[int], list[float], list[int]]:
    return [0] * len(ids), [0.0] * len(ids), [-1] * len(ids)


def turn_context(
    messages: Sequence[dict[str, Any]],
    tokenizer: PreTrainedTokenizerBase,
    lookup: Callable[[str], StoredCompletion | None],
) -> TurnContext:
    """The context of a new turn: an earlier trajectory extended, or a fresh one.

    Args:
        messages: the request's messages (role/content dicts), the last one not an assistant's.
        tokenizer: the policy's tokenizer.
        lookup: `context_hash -> the stored completion` (see `Store.completion_by_context`).
    """
    for k in range(len(messages) - 1, 0, -1):
        if messages[k - 1]["role"] != "assistant":
            continue
        parent = lookup(context_hash(messages[:k]))
        if parent is None:
            continue
        trajectory = parent.trajectory
        observation = render_ids(messages[k:], tokenizer, with_bos=False)
        mask, logprobs, versions = _inserted(observation)
        return TurnContext(
            parent_id=parent.id,
            token_ids=[*trajectory["token_ids"], *observation],
            action_mask=[*trajectory["action_mask"], *mask],
            rollout_logprobs=[*trajectory["rollout_logprobs"], *logprobs],
            policy_versions=[*trajectory["policy_versions"], *versions],
            turn_spans=[tuple(s) for s in trajectory["turn_spans"]],
        )
    ids = render_ids(messages, tokenizer)
    mask, logprobs, versions = _inserted(ids)
    return TurnContext(None, ids, mask, logprobs, versions)
