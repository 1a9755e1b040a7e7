"""Sessions: a call continues the trajectory of the reply it extends, or starts a new one.

A client continuing a chat resends the whole history. When the history's first `k` messages are
exactly an earlier request's messages followed by the reply the server gave it (compared as
`sao.serve.conversation` says), the new turn extends that earlier trajectory: its exact token ids
(actions as sampled, with their log-probs and versions) stay, the text between that reply and the
next generation is appended as observation tokens (mask 0; `MessageRenderer.continuation_ids`),
and the new reply becomes the next action turn.

Which earlier reply may be extended:

- in an episode (`X-Episode-Id`): only the episode's newest completion (its tip). A first call
  starts the episode (`new`); a later call that does not extend the tip (an edited or foreign
  history) starts another trajectory from its rendered messages (`restarted`);
- without an episode: the newest completion outside any episode whose conversation hashes to the
  history's first `k` messages, for the largest such `k` (`continued`), else `new`.

Forced tokens of a tool_choice (`sao.serve.tools`) follow the context, masked as observations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sao.rollout.rendering import MessageRenderer
from sao.rollout.requests import Completion
from sao.serve.conversation import context_hash
from sao.serve.store import CONTINUED, NEW, RESTARTED, StoredCompletion


@dataclass
class TurnContext:
    """The trajectory a new turn extends, and the prompt to sample the turn from."""

    parent_id: str | None
    token_ids: list[int]
    action_mask: list[int]
    rollout_logprobs: list[float]
    policy_versions: list[int]
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    kind: str = NEW

    @property
    def prompt_ids(self) -> list[int]:
        return self.token_ids

    def extended(self, ids: Sequence[int]) -> TurnContext:
        """This context with `ids` appended as observation tokens (mask 0, never trained)."""
        n = len(ids)
        return TurnContext(
            self.parent_id,
            [*self.token_ids, *ids],
            [*self.action_mask, *[0] * n],
            [*self.rollout_logprobs, *[0.0] * n],
            [*self.policy_versions, *[-1] * n],
            list(self.turn_spans),
            self.kind,
        )

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


def _fresh(ids: list[int], kind: str) -> TurnContext:
    return TurnContext(None, [], [], [], [], kind=kind).extended(ids)


def _continue(
    parent: StoredCompletion,
    messages: Sequence[Mapping[str, Any]],
    k: int,
    tools: Sequence[Mapping[str, Any]],
    renderer: MessageRenderer,
) -> TurnContext:
    trajectory = parent.trajectory
    start, end = trajectory["turn_spans"][-1]
    reply_ids = trajectory["token_ids"][start:end]
    observation = renderer.continuation_ids(parent.messages, reply_ids, messages[k:], tools)
    context = TurnContext(
        parent.id,
        list(trajectory["token_ids"]),
        list(trajectory["action_mask"]),
        list(trajectory["rollout_logprobs"]),
        list(trajectory["policy_versions"]),
        [tuple(s) for s in trajectory["turn_spans"]],
        CONTINUED,
    )
    return context.extended(observation)


def turn_context(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    renderer: MessageRenderer,
    lookup: Callable[[str], StoredCompletion | None],
    episode_tip: StoredCompletion | None = None,
    in_episode: bool = False,
) -> TurnContext:
    """The context of a new turn: an earlier trajectory extended, or a fresh one (module
    docstring).

    Args:
        messages: the request's messages, the last one not an assistant's.
        tools: the request's declared tools (a chat template may render them).
        renderer: the policy's message renderer.
        lookup: `context_hash -> the stored completion` outside episodes.
        episode_tip: the episode's newest completion (None for a new episode).
        in_episode: whether the call names an episode.
    """
    if in_episode:
        if episode_tip is None:
            return _fresh(renderer.conversation_ids(messages, tools), NEW)
        k = len(episode_tip.messages) + 1
        if len(messages) > k and context_hash(messages[:k]) == episode_tip.context_hash:
            return _continue(episode_tip, messages, k, tools, renderer)
        return _fresh(renderer.conversation_ids(messages, tools), RESTARTED)
    for k in range(len(messages) - 1, 0, -1):
        if messages[k - 1]["role"] != "assistant":
            continue
        parent = lookup(context_hash(messages[:k]))
        if parent is not None:
            return _continue(parent, messages, k, tools, renderer)
    return _fresh(renderer.conversation_ids(messages, tools), NEW)
