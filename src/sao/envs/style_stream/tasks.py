"""`style_stream` prompts, and the schedule that moves the preferred style along the stream.

Each prompt offers the same styles and asks for one line about a subject; the preferred style is
never in the prompt, only in `meta["preferred_style"]` and `meta["phase"]`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Sequence

from sao.envs.base import HashSplitTaskSource, Task, stable_id
from sao.envs.style_stream.styles import (
    OCCASIONS,
    PHRASINGS,
    STYLES,
    SUBJECTS,
    validate_styles,
)

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
