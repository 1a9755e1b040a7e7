"""`reasoning_gym:<dataset>`: any reasoning-gym procedural dataset, scored by the library itself.

    Calculate 478 / 1 + -682.
    <answer>-204</answer>

Single turn: the policy answers once inside answer tags and the reward is the dataset's own
`score_answer` (in [0, 1]; some datasets give partial credit) on the stripped answer. Tasks come
from `tasks`: `basic_arithmetic` (prompts of 16-73 characters) fits the tiny policy well and is
the default of the tests; `spell_backward`, `lcm`, `chain_sum` and `count_bits` fit within 120
characters.
"""

from __future__ import annotations

from typing import Any

from sao.envs.base import END_ANSWER, END_MAX_TURNS, StepResult, Task
from sao.envs.reasoning_gym.tasks import check_dataset, entry_of
from sao.envs.text_protocol import FORMAT_ERROR_MESSAGES, parse_action, wrap_output
from sao.envs.turns import TurnLimitedEnvironment
from sao.formats.tags import ANSWER_CLOSE


class ReasoningGymEnv(TurnLimitedEnvironment):
    """One answer per prompt, scored by the dataset's `score_answer`.

    Args:
        dataset: the reasoning-gym dataset name (the `<dataset>` of `reasoning_gym:<dataset>`).
        max_turns: actions allowed; a malformed action ends the episode at the last one.
        max_output_chars: longest error observation (only used when `max_turns > 1`).
        binary_reward: reward 1 only for a full score, else 0 (some datasets give partial
            credit, e.g. `spell_backward` for a matching prefix).
    """

    stop_tags: tuple[str, ...] = (ANSWER_CLOSE,)

    def __init__(
        self,
        dataset: str,
        max_turns: int = 1,
        max_output_chars: int = 80,
        binary_reward: bool = False,
    ) -> None:
        super().__init__(max_turns)
        self.dataset = check_dataset(dataset)
        self.binary_reward = bool(binary_reward)
        self.max_output_chars = max_output_chars
        self._scored: tuple[Any, dict[str, Any]] | None = None

    def start(self, task: Task) -> str:
        """Check that `task` comes from this dataset and find its entry; returns its prompt."""
        if task.meta.get("dataset") != self.dataset:
            raise ValueError(
                f"task.meta['dataset']: expected {self.dataset!r}, got {task.meta.get('dataset')!r}"
            )
        self._scored = entry_of(task)
        return task.prompt

    def take_turn(self, action_text: str) -> StepResult:
        """Score the text inside the answer tags; anything else is a format error."""
        assert self._scored is not None
        parsed = parse_action(action_text)
        info: dict[str, Any] = {
            "turn": self.turn,
            "tool_called": False,
            "format_error": "no_tag" if parsed.kind == "python" else parsed.format_error,
            "end_reason": None,
        }
        if parsed.kind == "answer":
            data, entry = self._scored
            try:
                score = float(data.score_answer(parsed.content.strip(), entry))
            except Exception as err:  # a scorer bug is a counted zero, not a dead worker
                info["score_error"] = f"{type(err).__name__}: {err}"
                score = 0.0
            score = min(1.0, max(0.0, score))
            info.update(end_reason=END_ANSWER, correct=score == 1.0, score=score)
            reward = float(score == 1.0) if self.binary_reward else score
            return StepResult("", reward, True, info)
        if self.last_turn:
            info.update(end_reason=END_MAX_TURNS, correct=False)
            return StepResult("", 0.0, True, info)
        message = FORMAT_ERROR_MESSAGES[info["format_error"]]
        return StepResult(wrap_output(message, self.max_output_chars), 0.0, False, info)
