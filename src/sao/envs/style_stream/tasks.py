"""`style_stream` prompts, and the schedule that moves the preferred style along the stream.

Each prompt offers the same styles and asks for one line about a subject; the preferred style is
never in the prompt, only in `meta["preferred_style"]` and `meta["phase"]` -- except in a
*requested* prompt (a share `request_rate` of the training stream), which adds a line naming the
style outright, as a user sometimes does; there the requested style is the preferred one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import random
from collections.abc import Iterator, Sequence

from sao.envs.base import HashSplitTaskSource, Task, stable_id, stream_chunk_seed
from sao.envs.style_stream.styles import (
    OCCASIONS,
    PHRASINGS,
    STYLES,
    SUBJECTS,
    validate_styles,
)

DEFAULT_SCHEDULE: tuple[str, ...] = ("cute", "chuunibyou", "classical")
DEFAULT_SWITCH_EVERY = 1280
REQUEST_LINE = "Write it in the {style} style.\n"


def preferred_style_at(index: int, schedule: Sequence[str], switch_every: int) -> tuple[str, int]:
    """`(preferred style, phase)` of prompt `index` of the stream; the schedule repeats."""
    if index < 0:
        raise ValueError(f"index: must be >= 0, got {index}")
    phase = index // switch_every
    return schedule[phase % len(schedule)], phase


def requested_at(index: int, seed: int, request_rate: float) -> bool:
    """Whether prompt `index` of the stream with `seed` is a requested one: a hash of the pair
    below `request_rate`, so the same prompts are requested whatever else the run does."""
    if request_rate <= 0.0:
        return False
    digest = hashlib.sha256(f"style_stream/request/{seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < request_rate


class StyleStreamTaskSource(HashSplitTaskSource):
    """Style prompts whose preferred style follows a schedule over the prompt stream.

    `stream("train", seed)` numbers prompts from 0 and marks prompt `i` with the schedule's style
    for phase `i // switch_every`; `train(n, seed)` is marked the same way from 0. Test tasks all
    prefer `test_style` (by default the schedule's first style): held-out evaluation asks for one
    fixed style, since a held-out set has no place in the stream.

    With `request_rate > 0` a training prompt is, with that probability (a hash of its index and
    the seed, see `requested_at`), *requested*: `request(task, style)` adds a line naming the
    schedule's style, and `meta["requested_style"]` records it (absent otherwise). Test tasks
    are never requested: they measure the preference the policy holds unprompted.

    Args:
        styles: the styles every prompt offers.
        schedule: the preferred style of each phase, in order (repeats after the last).
        switch_every: prompts per phase.
        test_style: the preferred style of every test task.
        test_fraction: share of the prompt space held out for `test`.
        request_rate: share of training prompts that name their preferred style.
    """

    def __init__(
        self,
        styles: Sequence[str] = STYLES,
        schedule: Sequence[str] = DEFAULT_SCHEDULE,
        switch_every: int = DEFAULT_SWITCH_EVERY,
        test_style: str | None = None,
        test_fraction: float = 0.1,
        request_rate: float = 0.0,
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
        if (
            isinstance(request_rate, bool)
            or not isinstance(request_rate, float | int)
            or not 0.0 <= request_rate <= 1.0
        ):
            raise ValueError(f"request_rate: must be a number in [0, 1], got {request_rate!r}")
        self.request_rate = float(request_rate)
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

    def request(self, task: Task, style: str) -> Task:
        """`task` with a line asking for `style`, which becomes its preferred style."""
        if style not in self.styles:
            raise ValueError(f"style: must be one of {list(self.styles)}, got {style!r}")
        if task.meta.get("requested_style") is not None:
            raise ValueError(f"task: already requests {task.meta['requested_style']!r}")
        prompt = task.prompt + REQUEST_LINE.format(style=style)
        meta = {**task.meta, "preferred_style": style, "requested_style": style}
        return dataclasses.replace(
            task, task_id=stable_id("style_stream", prompt), prompt=prompt, answer=style, meta=meta
        )

    def mark(self, task: Task, index: int, seed: int = 0) -> Task:
        """`task` as prompt `index` of the stream with `seed`: its preferred style and phase in
        `meta`, and the request line when `requested_at(index, seed, request_rate)`."""
        style, phase = preferred_style_at(index, self.schedule, self.switch_every)
        meta = {**task.meta, "preferred_style": style, "phase": phase, "index": index}
        marked = dataclasses.replace(task, answer=style, meta=meta)
        if requested_at(index, seed, self.request_rate):
            return self.request(marked, style)
        return marked

    def train(self, n: int, seed: int) -> list[Task]:
        """`n` training prompts, marked as the first `n` prompts of a stream with `seed`."""
        return [self.mark(task, i, seed) for i, task in enumerate(super().train(n, seed))]

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
        if split != "train":
            yield from super().stream(split, seed, chunk)
            return
        # The same prompts as `TaskSource.stream`, marked once, by their position in the stream
        # (marking each chunk's `train` first would request by the position in the chunk).
        unmarked = (
            task
            for offset in itertools.count()
            for task in HashSplitTaskSource.train(
                self, chunk, stream_chunk_seed(split, seed, offset)
            )
        )
        for index, task in enumerate(unmarked):
            yield self.mark(task, index, seed)
