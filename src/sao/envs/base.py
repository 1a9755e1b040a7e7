"""The environment protocol: tasks, step results, environments and task sources.

An environment speaks plain text. The agent loop feeds it the policy's action text (everything
the policy sampled up to and including one of the environment's `stop_tags`) and appends the
returned `observation` to the sequence as inserted (non-action) tokens.

End reasons recorded in `StepResult.info["end_reason"]` once `done` is true:

- `"answer"`: the policy gave a final answer (the reward says whether it was right).
- `"max_turns"`: the policy used `max_turns` actions without answering; reward 0.
- `"max_tokens"`: never set by an environment. The agent loop sets it when the trajectory runs
  out of token budget before the environment says `done`; the reward is then 0.
"""

from __future__ import annotations

import abc
import hashlib
import itertools
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

END_ANSWER = "answer"
END_MAX_TURNS = "max_turns"
END_MAX_TOKENS = "max_tokens"

SPLITS = ("train", "test")


@dataclass(frozen=True)
class Task:
    """One problem for an environment.

    Attributes:
        task_id: stable identifier; equal prompts give equal ids.
        prompt: the text the model sees first.
        answer: the reference answer, as text.
        meta: free-form, JSON-able facts (difficulty, kind, the reference expression ...).
    """

    task_id: str
    prompt: str
    answer: str
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("task_id", "prompt", "answer"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"Task.{name}: expected str, got {type(getattr(self, name))}")
        if not self.task_id:
            raise ValueError("Task.task_id: must not be empty")
        if not self.prompt:
            raise ValueError("Task.prompt: must not be empty")
        if not isinstance(self.meta, dict):
            raise TypeError(f"Task.meta: expected dict, got {type(self.meta)}")


@dataclass(frozen=True)
class StepResult:
    """What the environment returns for one action.

    Attributes:
        observation: text to append after the action; `""` when `done`.
        reward: the outcome reward on the final step (what pass@1 and `rollout/reward_mean`
            read); ignored on the other steps.
        done: whether the trajectory has ended.
        info: facts about the step, e.g. `end_reason`, `tool_called`, `format_error`.
        action_reward: a reward for this action alone, apart from the outcome (e.g. a penalty
            for a malformed command): the learner adds it on the action's last token
            (`Trajectory.turn_rewards`); outcome metrics leave it out.
    """

    observation: str
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)
    action_reward: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.observation, str):
            raise TypeError(f"StepResult.observation: expected str, got {type(self.observation)}")
        if self.done and self.observation:
            raise ValueError("StepResult.observation: must be empty when done is true")
        if not math.isfinite(self.action_reward):
            raise ValueError(f"StepResult.action_reward: must be finite, got {self.action_reward}")


class Environment(abc.ABC):
    """A text environment serving one trajectory at a time.

    Instances are cheap: make one per trajectory, or call `reset` again to reuse one.

    Attributes:
        max_turns: the most actions one trajectory may take; the last allowed action that does
            not end the trajectory ends it with `end_reason = "max_turns"` and reward 0.
        stop_tags: closing tags that end one action; the agent loop stops sampling at any of them.
    """

    max_turns: int
    stop_tags: tuple[str, ...]

    @abc.abstractmethod
    def reset(self, task: Task) -> str:
        """Start a trajectory for `task` and return the initial prompt text."""

    @abc.abstractmethod
    def step(self, action_text: str) -> StepResult:
        """Apply one action (text up to and including a stop tag) and return the result."""


class TaskSource(abc.ABC):
    """Produces tasks for one environment, with disjoint train and test splits."""

    @abc.abstractmethod
    def train(self, n: int, seed: int) -> list[Task]:
        """Return `n` training tasks, deterministic in `seed`."""

    @abc.abstractmethod
    def test(self, n: int, seed: int) -> list[Task]:
        """Return `n` held-out tasks, deterministic in `seed`; none of them appears in `train`."""

    def stream(self, split: str, seed: int, chunk: int = 256) -> Iterator[Task]:
        """Yield tasks of `split` without end, `chunk` at a time, each chunk from a new seed.

        Chunk seeds are hashed from `(split, seed, chunk index)`, so the stream never replays
        `train(n, s)` for a small `s` in order: the warm start's demonstrations are drawn with
        `train(n, 0)`, and a stream starting there would open RL on the very tasks SFT memorised.
        """
        if split not in SPLITS:
            raise ValueError(f"stream: split must be one of {SPLITS}, got {split!r}")
        fetch = self.train if split == "train" else self.test
        for offset in itertools.count():
            yield from fetch(chunk, stream_chunk_seed(split, seed, offset))


def stream_chunk_seed(split: str, seed: int, offset: int) -> int:
    """The task seed of chunk `offset` of `stream(split, seed)`: 63 bits of a hash."""
    digest = hashlib.sha256(f"stream/{split}/{seed}/{offset}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def in_test_split(text: str, test_fraction: float) -> bool:
    """Whether `text` belongs to the test split.

    The split is a pure function of the text (a hash into 10,000 buckets), so the same prompt is
    always on the same side whatever the seed or the order of generation.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction: must be in (0, 1), got {test_fraction}")
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % 10_000 < test_fraction * 10_000


def stable_id(prefix: str, text: str) -> str:
    """A short id derived from `text`, so equal prompts share an id."""
    return f"{prefix}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"


class HashSplitTaskSource(TaskSource):
    """A task source over a generator, split into train and test by hashing each prompt.

    Subclasses implement `generate(rng)`. Test tasks are distinct from each other (a clean
    evaluation set); training tasks may repeat.

    Args:
        test_fraction: share of the prompt space held out for testing.
        max_draws_per_task: how many draws to try per requested task before giving up, so an
            impossible request (more distinct test tasks than exist) fails instead of hanging.
    """

    def __init__(self, test_fraction: float = 0.1, max_draws_per_task: int = 1000) -> None:
        if not isinstance(test_fraction, float | int) or not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction: must be in (0, 1), got {test_fraction!r}")
        if max_draws_per_task < 1:
            raise ValueError(f"max_draws_per_task: must be >= 1, got {max_draws_per_task}")
        self.test_fraction = float(test_fraction)
        self.max_draws_per_task = max_draws_per_task

    @abc.abstractmethod
    def generate(self, rng: random.Random) -> Task:
        """Draw one task (from either split) using `rng` only."""

    def train(self, n: int, seed: int) -> list[Task]:
        """Return `n` training tasks (repeats allowed), deterministic in `seed`."""
        return self._collect(n, seed, lambda t: not self._is_test(t), distinct=False)

    def test(self, n: int, seed: int) -> list[Task]:
        """Return `n` distinct held-out tasks, deterministic in `seed`."""
        return self._collect(n, seed, self._is_test, distinct=True)

    def _is_test(self, task: Task) -> bool:
        return in_test_split(task.prompt, self.test_fraction)

    def _collect(
        self, n: int, seed: int, keep: Callable[[Task], bool], *, distinct: bool
    ) -> list[Task]:
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n: must be a non-negative int, got {n!r}")
        if not isinstance(seed, int):
            raise TypeError(f"seed: expected int, got {type(seed)}")
        rng = random.Random(seed)
        tasks: list[Task] = []
        seen: set[str] = set()
        for _ in range(n * self.max_draws_per_task):
            if len(tasks) == n:
                break
            task = self.generate(rng)
            if not keep(task) or (distinct and task.prompt in seen):
                continue
            seen.add(task.prompt)
            tasks.append(task)
        if len(tasks) < n:
            raise ValueError(
                f"n: asked for {n} tasks but found only {len(tasks)} after "
                f"{n * self.max_draws_per_task} draws (the prompt space is too small)"
            )
        return tasks
