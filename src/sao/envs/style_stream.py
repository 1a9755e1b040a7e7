"""The `style_stream` environment: the paper's online simulation of a drifting preference.

Each prompt offers the same writing styles and asks for one short line about a subject:

    Styles: cute, chuunibyou, classical, pirate.
    Write one line about the moon at night.
    <answer>arr, the moon be a fine sight, matey</answer>

The policy answers once; the judge (rules by default, an LLM optionally; see
`sao.envs.style_stream_judge`) gives `r_quality * r_style`, binary, where `r_style` asks for the
*preferred* style. The prompt never names that style: it follows a schedule over the stream of
training prompts (every `switch_every` prompts the next style of `schedule`, e.g. cute ->
chuunibyou -> classical), carried in each task's `meta["preferred_style"]` and `meta["phase"]`,
so the policy has to find the preferred style from the reward and follow it when it moves. With
`B` trajectories per learner step and `G` per prompt, the switches fall on learner steps
`k * switch_every * G / B`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Sequence
from typing import Any

from sao.envs.base import (
    END_ANSWER,
    END_MAX_TURNS,
    Environment,
    HashSplitTaskSource,
    StepResult,
    Task,
    stable_id,
)
from sao.envs.style_stream_judge import Judge, make_judge
from sao.envs.style_stream_styles import (
    OCCASIONS,
    PHRASINGS,
    STYLES,
    SUBJECTS,
    validate_styles,
)
from sao.envs.text_protocol import FORMAT_ERROR_MESSAGES, parse_action, wrap_output
from sao.tags import ANSWER_CLOSE

DEFAULT_SCHEDULE: tuple[str, ...] = ("cute", "chuunibyou", "classical")
DEFAULT_SWITCH_EVERY = 1280


def preferred_style_at(index: int, schedule: Sequence[str], switch_every: int) -> tuple[str, int]:
    """`(preferred style, phase)` of prompt `index` of the stream; the schedule repeats."""
    if index < 0:
        raise ValueError(f"index: must be >= 0, got {index}")
    phase = index // switch_every
    return schedule[phase % len(schedule)], phase


class StyleStreamTaskSource(HashSplitTaskSource):
    """Style prompts whose preferred style follows a schedule over the prompt stream.

    `stream("train", seed)` numbers prompts from 0 and marks prompt `i` with the schedule's style
    for phase `i // switch_every`; `train(n, seed)` is marked the same way from 0. Test tasks all
    prefer `test_style` (by default the schedule's first style): held-out evaluation asks for one
    fixed style, since a held-out set has no place in the stream.

    Args:
        styles: the styles every prompt offers.
        schedule: the preferred style of each phase, in order (repeats after the last).
        switch_every: prompts per phase.
        test_style: the preferred style of every test task.
        test_fraction: share of the prompt space held out for `test`.
    """

    def __init__(
        self,
        styles: Sequence[str] = STYLES,
        schedule: Sequence[str] = DEFAULT_SCHEDULE,
        switch_every: int = DEFAULT_SWITCH_EVERY,
        test_style: str | None = None,
        test_fraction: float = 0.1,
    ) -> None:
        super().__init__(test_fraction=test_fraction)
        self.styles = validate_styles(styles)
        self.schedule = tuple(schedule)
        if not self.schedule or any(s not in self.styles for s in self.schedule):
            raise ValueError(
                f"schedule: must be a non-empty list of offered styles {list(self.styles)}, "
                f"got {list(self.schedule)}"
            )
        if not isinstance(switch_every, int) or switch_every < 1:
            raise ValueError(f"switch_every: must be an int >= 1, got {switch_every!r}")
        self.switch_every = switch_every
        self.test_style = self.schedule[0] if test_style is None else test_style
        if self.test_style not in self.styles:
            raise ValueError(f"test_style: must be one of {list(self.styles)}, got {test_style!r}")
        self._header = "Styles: " + ", ".join(self.styles) + ".\n"

    def generate(self, rng: random.Random) -> Task:
        """Draw one prompt (either split), not yet marked with a preferred style."""
        subject = rng.choice(SUBJECTS)
        occasion = rng.choice(OCCASIONS)
        request = rng.choice(PHRASINGS).format(subject=subject, occasion=occasion)
        prompt = self._header + request + "\n"
        return Task(
            task_id=stable_id("style_stream", prompt),
            prompt=prompt,
            answer="",
            meta={"env": "style_stream", "subject": subject, "styles": list(self.styles)},
        )

    def mark(self, task: Task, index: int) -> Task:
        """`task` as prompt `index` of the stream: its preferred style and phase in `meta`."""
        style, phase = preferred_style_at(index, self.schedule, self.switch_every)
        meta = {**task.meta, "preferred_style": style, "phase": phase, "index": index}
        return dataclasses.replace(task, answer=style, meta=meta)

    def train(self, n: int, seed: int) -> list[Task]:
        """`n` training prompts, marked as the first `n` prompts of a stream."""
        return [self.mark(task, i) for i, task in enumerate(super().train(n, seed))]

    def test(self, n: int, seed: int) -> list[Task]:
        """`n` distinct held-out prompts, all preferring `test_style`."""
        tasks = super().test(n, seed)
        return [
            dataclasses.replace(
                t, answer=self.test_style, meta={**t.meta, "preferred_style": self.test_style}
            )
            for t in tasks
        ]

    def stream(self, split: str, seed: int, chunk: int = 256) -> Iterator[Task]:
        """Prompts without end; training prompts marked by their position in this stream."""
        tasks = super().stream(split, seed, chunk)
        if split != "train":
            yield from tasks
            return
        for index, task in enumerate(tasks):
            yield self.mark(task, index)


class StyleStreamEnv(Environment):
    """One reply per prompt, scored by a judge against the task's preferred style.

    Args:
        max_turns: actions allowed; a malformed action ends the episode at the last one.
        judge: the judge; by default built by `make_judge` from the keyword options below.
        max_output_chars: longest error observation (only used when `max_turns > 1`).
        **judge_options: `styles`, `min_chars`, `max_chars`, `judge_url`, `judge_model`,
            `judge_timeout_s`, `judge_retries`, `judge_backoff_s`, `judge_api_key_env`.
    """

    name = "style_stream"
    stop_tags: tuple[str, ...] = (ANSWER_CLOSE,)

    def __init__(
        self,
        max_turns: int = 1,
        judge: Judge | None = None,
        max_output_chars: int = 80,
        **judge_options: Any,
    ) -> None:
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns: must be an int >= 1, got {max_turns!r}")
        if judge is not None and judge_options:
            raise ValueError(f"judge options {sorted(judge_options)}: not allowed with judge=")
        self.max_turns = max_turns
        self.max_output_chars = max_output_chars
        self.judge: Judge = judge if judge is not None else make_judge(**judge_options)
        self._task: Task | None = None
        self._turn = 0
        self._done = False

    def reset(self, task: Task) -> str:
        """Start an episode for `task`; returns its prompt."""
        if not isinstance(task, Task):
            raise TypeError(f"task: expected Task, got {type(task)}")
        missing = [k for k in ("subject", "preferred_style") if k not in task.meta]
        if missing:
            raise ValueError(f"task.meta: a style_stream task needs {missing}")
        self._task, self._turn, self._done = task, 0, False
        return task.prompt

    def step(self, action_text: str) -> StepResult:
        """Judge the reply inside the answer tags; anything else is a format error."""
        if self._task is None:
            raise RuntimeError("StyleStreamEnv.step: call reset(task) first")
        if self._done:
            raise RuntimeError("StyleStreamEnv.step: the episode has ended; call reset(task)")
        self._turn += 1
        parsed = parse_action(action_text)
        meta = self._task.meta
        info: dict[str, Any] = {
            "turn": self._turn,
            "tool_called": False,
            "format_error": parsed.format_error,
            "preferred_style": meta["preferred_style"],
            "phase": meta.get("phase"),
            "end_reason": None,
        }
        if parsed.kind == "answer":
            reply = parsed.content.strip()
            verdict = self.judge.judge(self._task.prompt, reply, meta["subject"])
            reward = verdict.reward(meta["preferred_style"])
            info.update(
                end_reason=END_ANSWER,
                correct=reward == 1.0,
                reply=reply,
                style=verdict.style,
                quality=verdict.quality,
                problems=list(verdict.problems),
                judge_error=verdict.error,
            )
            return self._finish(reward, info)
        if parsed.kind == "python":
            info["format_error"] = "no_tag"
        if self._turn >= self.max_turns:
            info.update(end_reason=END_MAX_TURNS, correct=False, style=None, quality=False)
            return self._finish(0.0, info)
        message = FORMAT_ERROR_MESSAGES[info["format_error"]]
        return StepResult(wrap_output(message, self.max_output_chars), 0.0, False, info)

    def _finish(self, reward: float, info: dict[str, Any]) -> StepResult:
        self._done = True
        return StepResult("", reward, True, info)
