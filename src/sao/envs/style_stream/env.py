"""The `style_stream` environment: the paper's online simulation of a drifting preference.

Each prompt offers the same writing styles and asks for one short line about a subject:

    Styles: cute, chuunibyou, classical, pirate.
    Write one line about the moon at night.
    <answer>arr, the moon be a fine sight, matey</answer>

The policy answers once; the judge (rules by default, an LLM optionally; see
`sao.envs.style_stream.judge`) gives `r_quality * r_style`, binary, where `r_style` asks for the
*preferred* style. The prompt never names that style: it follows a schedule over the stream of
training prompts (`tasks`: every `switch_every` prompts the next style of `schedule`, e.g.
cute -> chuunibyou -> classical), carried in each task's `meta["preferred_style"]` and `meta["phase"]`,
so the policy has to find the preferred style from the reward and follow it when it moves. A
requested prompt names its style (`meta["requested_style"]`, passed on in the step's info). With
`B` trajectories per learner step and `G` per prompt, the switches fall on learner steps
`k * switch_every * G / B`.
"""

from __future__ import annotations

from typing import Any

from sao.envs.base import END_ANSWER, END_MAX_TURNS, StepResult, Task
from sao.envs.style_stream.judge import Judge, make_judge
from sao.envs.text_protocol import FORMAT_ERROR_MESSAGES, parse_action, wrap_output
from sao.envs.turns import TurnLimitedEnvironment
from sao.formats.tags import ANSWER_CLOSE


class StyleStreamEnv(TurnLimitedEnvironment):
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
        super().__init__(max_turns)
        if judge is not None and judge_options:
            raise ValueError(f"judge options {sorted(judge_options)}: not allowed with judge=")
        self.max_output_chars = max_output_chars
        self.judge: Judge = judge if judge is not None else make_judge(**judge_options)

    def start(self, task: Task) -> str:
        """Check that `task` names its subject and preferred style; returns its prompt."""
        missing = [k for k in ("subject", "preferred_style") if k not in task.meta]
        if missing:
            raise ValueError(f"task.meta: a style_stream task needs {missing}")
        return task.prompt

    def take_turn(self, action_text: str) -> StepResult:
        """Judge the reply inside the answer tags; anything else is a format error."""
        parsed = parse_action(action_text)
        meta = self.task.meta
        info: dict[str, Any] = {
            "turn": self.turn,
            "tool_called": False,
            "format_error": parsed.format_error,
            "preferred_style": meta["preferred_style"],
            "phase": meta.get("phase"),
            "requested_style": meta.get("requested_style"),
            "end_reason": None,
        }
        if parsed.kind == "answer":
            reply = parsed.content.strip()
            verdict = self.judge.judge(self.task.prompt, reply, meta["subject"])
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
            return StepResult("", reward, True, info)
        if parsed.kind == "python":
            info["format_error"] = "no_tag"
        if self.last_turn:
            info.update(end_reason=END_MAX_TURNS, correct=False, style=None, quality=False)
            return StepResult("", 0.0, True, info)
        message = FORMAT_ERROR_MESSAGES[info["format_error"]]
        return StepResult(wrap_output(message, self.max_output_chars), 0.0, False, info)
