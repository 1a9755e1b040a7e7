"""Episodes that begin part-way through a recorded trajectory: fresh endings of the same prefix.

What a value at a token means is the expected return of the episodes that share its prefix; to
measure one (e.g. `sao inspect critic-ceiling oracle`), sample endings of the prefix from the
same policy in the same environment. `PrefixAgentLoop` does that: it rebuilds each episode's
environment by stepping it through the recorded earlier actions (refusing one whose observations
do not come back identical, since then the endings would not continue the recorded episode),
then samples the rest of the cut turn after its recorded part, and from there runs as
`AgentLoop` does. The cut turn's text reaches the environment whole, the recorded part included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sao.envs.base import Task
from sao.rollout.agent_loop import AgentLoop, Episode
from sao.rollout.requests import Completion, SamplingParams
from sao.trajectory import Trajectory


@dataclass(frozen=True)
class Prefix:
    """Where endings start: `trajectory` cut before its action token `cut`, which lies in the turn
    that starts at `turn_start`, after the earlier turns' actions `replay` (their decoded text)."""

    trajectory: Trajectory
    cut: int
    turn_start: int
    replay: tuple[str, ...]


def prefix_at(trajectory: Trajectory, cut: int, decode: Callable[[list[int]], str]) -> Prefix:
    """The prefix of `trajectory` before its action token `cut`; `decode` turns a turn's token ids
    into the text the environment read (the tokenizer's decode, special tokens kept)."""
    turn = next((k for k, (s, e) in enumerate(trajectory.turn_spans) if s <= cut < e), None)
    if turn is None:
        raise ValueError(f"prefix_at: position {cut} is not an action token of a turn")
    replay = tuple(decode(list(trajectory.token_ids[s:e])) for s, e in trajectory.turn_spans[:turn])
    return Prefix(trajectory, cut, trajectory.turn_spans[turn][0], replay)


class PrefixAgentLoop(AgentLoop):
    """An `AgentLoop` whose episodes begin at the `Prefix` registered under their id in
    `prefixes` (one per episode, consumed by `start`).

    The environment's tags must be single tokens of the tokenizer: a stop string spanning the cut
    would go unseen, so `start` refuses them.

    Raises (from `start`, hence `run`):
        ValueError: no prefix registered for the episode, or tags that are not single tokens.
        RuntimeError: the environment did not replay a recorded turn (it ended, or its
            observation differs from the recorded one).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prefixes: dict[str, Prefix] = {}
        self._recorded_part: dict[str, Completion] = {}

    def start(self, episode_id: str, task: Task, metadata: dict[str, Any] | None = None) -> None:
        if episode_id not in self.prefixes:
            raise ValueError(f"PrefixAgentLoop.start: no prefix registered for {episode_id!r}")
        prefix = self.prefixes.pop(episode_id)
        recorded = prefix.trajectory
        env = self.env_factory()
        stop_ids, stop_strings = self._stops(env)
        if stop_strings:
            raise ValueError(
                f"PrefixAgentLoop: the tags {stop_strings} are not single tokens of this "
                "tokenizer, so a turn cannot be resumed mid-way"
            )
        env.reset(task)
        for k, text in enumerate(prefix.replay):
            result = env.step(text)
            observed = self.renderer.observation_ids(result.observation)
            recorded_obs = recorded.token_ids[
                recorded.turn_spans[k][1] : recorded.turn_spans[k + 1][0]
            ]
            if result.done or list(recorded_obs) != observed:
                raise RuntimeError(
                    f"PrefixAgentLoop: episode {episode_id!r}: the environment did not replay "
                    f"turn {k} as recorded"
                )
        episode = Episode(episode_id, task, env, {"task_id": task.task_id, **(metadata or {})})
        episode.append_inserted(list(recorded.token_ids[: prefix.turn_start]))
        self._episodes[episode_id] = episode
        part = slice(prefix.turn_start, prefix.cut)
        self._recorded_part[episode_id] = Completion(
            episode_id,
            list(recorded.token_ids[part]),
            list(recorded.rollout_logprobs[part]),
            list(recorded.policy_versions[part]),
            "stop",
        )
        room = min(
            self.sampling.max_new_tokens - (prefix.cut - prefix.turn_start),
            self.max_tokens - prefix.cut,
        )
        params = SamplingParams(self.sampling.temperature, self.sampling.top_p, room)
        self.engine.submit(
            episode_id, list(recorded.token_ids[: prefix.cut]), params, stop_ids, stop_strings
        )

    def _on_action(self, episode: Episode, completion: Completion) -> None:
        part = self._recorded_part.pop(episode.episode_id, None)
        if part is not None:
            completion = dataclasses.replace(
                completion,
                token_ids=part.token_ids + completion.token_ids,
                logprobs=part.logprobs + completion.logprobs,
                versions=part.versions + completion.versions,
            )
        super()._on_action(episode, completion)
