"""Warm-start demonstrations for `style_stream`: one-line replies in uniformly random styles,
or in the style a prompt asks for.

The teacher does not know the preferred style -- nobody does before the reward says so -- so on
an ordinary prompt it writes in a style drawn uniformly from those offered. Under any preference
its reward there is therefore about `(1 - p_bad) / len(styles)`; RL has to find the preferred
style and follow it across switches. A share `request_rate` of the demonstration prompts names a
style drawn uniformly from those offered (not the schedule's), and the teacher writes in it: the
warm start can then produce every style on request, as a pretrained model can, so a stream whose
users sometimes ask outright (`StyleStreamTaskSource(request_rate=...)`) rewards a new preferred
style whatever the policy samples unprompted. With probability `p_bad` a reply also breaks a
quality rule (off topic, or a repeated word), so quality is something RL can improve too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from sao.envs.base import Task
from sao.envs.demonstration import TeacherTrajectory, Turn
from sao.envs.style_stream.env import StyleStreamEnv
from sao.envs.style_stream.styles import SUBJECTS
from sao.envs.style_stream.tasks import StyleStreamTaskSource
from sao.formats.tags import ANSWER_CLOSE, ANSWER_OPEN

REPLIES: dict[str, tuple[str, ...]] = {
    "cute": (
        "the {s} is so soft and sweet today, nya~",
        "uwu, a tiny {s} waves hello~",
        "nya~ i want to hug the {s} all day",
        "the little {s} makes me smile, uwu",
    ),
    "chuunibyou": (
        "the {s} trembles before my dark flame!",
        "my sealed eye sees the truth of the {s}!",
        "from the abyss, the {s} answers my call!",
        "bow, {s}, to the master of the dark flame!",
    ),
    "classical": (
        "thou art as fair as the {s}, my friend",
        "the {s} hath a grace that doth endure",
        "o {s}, thee i praise with all my heart",
        "fair {s}, thou dost shine upon us all",
    ),
    "pirate": (
        "arr, the {s} be a fine sight, matey",
        "ahoy, set sail for the {s}!",
        "arr matey, no {s} can stop this crew",
        "ahoy, the {s} be ours, arr",
    ),
}


# Share of demonstration prompts that request a style. Half: each style is then requested in
# 1/8 of the demonstrations (2,500 of the default 20,000), enough to tie the request line to its
# style, and the other half keeps the unprompted style mix uniform, which is where RL on
# unrequested prompts starts from.
SFT_REQUEST_RATE = 0.5


@dataclass(frozen=True)
class Demonstration(TeacherTrajectory):
    """One teacher reply and the reward the environment gave it.

    Attributes:
        task: the task (its `meta["preferred_style"]` set the reward; a requested one has
            `meta["requested_style"]`, which is also its preferred style).
        turns: one turn, `<answer>REPLY</answer>`.
        reward: the judge's reward under the task's preferred style.
        style: the style the teacher wrote in.
        bad: whether the teacher broke a quality rule on purpose.
        quality: whether the judge found the reply good.
    """

    style: str
    bad: bool
    quality: bool

    @property
    def action(self) -> str:
        """The reply, with its answer tags."""
        return self.turns[0].action

    @property
    def requested_style(self) -> str | None:
        """The style the prompt asked for, or None."""
        return self.task.meta.get("requested_style")


def write_reply(style: str, subject: str, rng: random.Random, bad: bool = False) -> str:
    """A one-line reply about `subject` in `style`; a `bad` one is off topic or repetitive."""
    if style not in REPLIES:
        raise ValueError(f"style: must be one of {list(REPLIES)}, got {style!r}")
    template = rng.choice(REPLIES[style])
    if not bad:
        return template.format(s=subject)
    if rng.random() < 0.5:
        return template.format(s=rng.choice([s for s in SUBJECTS if s != subject]))
    return template.format(s=f"{subject} {subject} {subject}")


def demonstrate(task: Task, env: StyleStreamEnv, rng: random.Random, p_bad: float) -> Demonstration:
    """Reply to `task` in the style it requests, else in a uniformly random offered style, and
    score it with `env`."""
    style = task.meta.get("requested_style") or rng.choice(task.meta["styles"])
    bad = rng.random() < p_bad
    action = ANSWER_OPEN + write_reply(style, task.meta["subject"], rng, bad) + ANSWER_CLOSE
    env.reset(task)
    result = env.step(action)
    quality = bool(result.info["quality"])
    return Demonstration(
        task, (Turn(action, result.observation),), result.reward, style, bad, quality
    )


def demonstrations(
    n: int,
    seed: int,
    *,
    split: str = "train",
    p_bad: float = 0.1,
    request_rate: float = SFT_REQUEST_RATE,
    source: StyleStreamTaskSource | None = None,
    env: StyleStreamEnv | None = None,
) -> list[Demonstration]:
    """`n` demonstrations on prompts of `split`, deterministic in `seed`.

    Each prompt requests, with probability `request_rate`, a style drawn uniformly from the
    source's styles; `source` itself must not request (its requests name the schedule's style).
    """
    if split not in ("train", "test"):
        raise ValueError(f"split: must be 'train' or 'test', got {split!r}")
    if not 0.0 <= p_bad <= 1.0:
        raise ValueError(f"p_bad: must be a probability, got {p_bad!r}")
    if not 0.0 <= request_rate <= 1.0:
        raise ValueError(f"request_rate: must be a probability, got {request_rate!r}")
    source = source if source is not None else StyleStreamTaskSource()
    if source.request_rate > 0.0:
        raise ValueError(
            "source: its requests name the schedule's style; the teacher draws its own "
            "(request_rate=), so pass a source with request_rate 0"
        )
    env = env if env is not None else StyleStreamEnv()
    tasks = source.train(n, seed) if split == "train" else source.test(n, seed)
    rng = random.Random(seed * 7919 + 29)
    demos = []
    for task in tasks:
        # No draw at rate 0, so those demonstrations are the ones written before requests.
        if request_rate > 0.0 and rng.random() < request_rate:
            task = source.request(task, rng.choice(source.styles))
        demos.append(demonstrate(task, env, rng, p_bad))
    return demos


def summarize(demos: Sequence[Demonstration]) -> dict[str, float]:
    """Mean reward (of all and of unrequested prompts) and share of good-quality replies; the
    share of requested prompts and of those answered in the requested style; each style's share
    of the unrequested replies (`share_<style>`) and of the requests (`requested_<style>`)."""
    if not demos:
        raise ValueError("demos: empty")
    requested = [d for d in demos if d.requested_style is not None]
    unrequested = [d for d in demos if d.requested_style is None]
    out = {
        "count": float(len(demos)),
        "accuracy": sum(d.reward for d in demos) / len(demos),
        "quality_rate": sum(d.quality for d in demos) / len(demos),
        "mean_chars": sum(len(d.text) for d in demos) / len(demos),
        "accuracy_unrequested": (
            sum(d.reward for d in unrequested) / len(unrequested) if unrequested else float("nan")
        ),
        "requested_share": len(requested) / len(demos),
        "request_followed": (
            sum(d.style == d.requested_style for d in requested) / len(requested)
            if requested
            else float("nan")
        ),
    }
    for style in REPLIES:
        out[f"share_{style}"] = (
            sum(d.style == style for d in unrequested) / len(unrequested)
            if unrequested
            else float("nan")
        )
        out[f"requested_{style}"] = (
            sum(d.requested_style == style for d in requested) / len(requested)
            if requested
            else float("nan")
        )
    return out
