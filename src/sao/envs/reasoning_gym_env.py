"""`reasoning_gym:<dataset>`: any reasoning-gym procedural dataset, scored by the library itself.

    Calculate 478 / 1 + -682.
    <answer>-204</answer>

Single turn: the policy answers once inside answer tags and the reward is the dataset's own
`score_answer` (in [0, 1]; some datasets give partial credit) on the stripped answer. Train and
test come from different dataset seeds, far apart, and test prompts must also hash into the test
split (`sao.envs.base.in_test_split`), so the two never share a prompt.

Most reasoning-gym prompts are long (hundreds of characters of instructions) for the tiny
character-level policy; the task source keeps only entries whose prompt and answer are short
printable ASCII (`max_prompt_chars`, `max_answer_chars`) and fails clearly when a dataset has too
few such entries. `basic_arithmetic` (prompts of 16-73 characters) fits well and is the default
of the tests; `spell_backward`, `lcm`, `chain_sum` and `count_bits` fit within 120 characters.

The library is optional: `pip install -e '.[gym]'` installs it.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
from typing import Any

from sao.envs.base import (
    END_ANSWER,
    END_MAX_TURNS,
    Environment,
    StepResult,
    Task,
    TaskSource,
    in_test_split,
    stable_id,
)
from sao.envs.text_protocol import FORMAT_ERROR_MESSAGES, parse_action, wrap_output
from sao.tags import ANSWER_CLOSE, ANSWER_OPEN

_TRAIN_SEED_BASE = 1_000
_TEST_SEED_BASE = 2**31
# Dataset items are drawn from `Random(seed + index)`, so split seeds sit far apart.
_SEED_STRIDE = 1_000_003
_DATASET_SIZE = 100_000
SHORT_DATASETS = ("basic_arithmetic", "spell_backward", "lcm", "chain_sum", "count_bits")


def _library() -> Any:
    try:
        import reasoning_gym
    except ImportError as err:
        raise ImportError(
            "reasoning_gym environments need the reasoning-gym package: "
            "pip install -e '.[gym]' (or pip install reasoning-gym)"
        ) from err
    return reasoning_gym


def check_dataset(name: str) -> str:
    """`name` if reasoning-gym knows it; ValueError listing some known datasets otherwise."""
    known = sorted(_library().factory.DATASETS)
    if name not in known:
        raise ValueError(
            f"reasoning_gym dataset {name!r} is unknown; short ones that fit the tiny policy: "
            f"{', '.join(SHORT_DATASETS)}; all {len(known)}: {', '.join(known[:12])}, ..."
        )
    return name


@functools.lru_cache(maxsize=64)
def _cached_dataset(name: str, seed: int, config_json: str) -> Any:
    config = json.loads(config_json)
    return _library().create_dataset(name, seed=seed, size=_DATASET_SIZE, **config)


def _dataset(name: str, seed: int, config: dict[str, Any]) -> Any:
    """The dataset object (cached: entries are rebuilt from it to score answers)."""
    return _cached_dataset(name, seed, json.dumps(config, sort_keys=True))


def _fits(entry: dict[str, Any], max_prompt_chars: int, max_answer_chars: int) -> bool:
    question, answer = str(entry["question"]), str(entry["answer"])
    return (
        question.isascii()
        and answer.isascii()
        and len(question) + 1 <= max_prompt_chars
        and len(answer) <= max_answer_chars
        and "\n" not in answer
        and all(" " <= ch <= "~" or ch == "\n" for ch in question + answer)
    )


class ReasoningGymTaskSource(TaskSource):
    """Short tasks of one reasoning-gym dataset.

    Args:
        dataset: the reasoning-gym dataset name.
        max_prompt_chars: longest prompt kept (question plus a newline).
        max_answer_chars: longest reference answer kept.
        test_fraction: share of the prompt space held out by hashing.
        max_draws_per_task: dataset entries tried per requested task before giving up.
        config: extra dataset config fields (reasoning-gym's own, e.g. `max_terms`).
    """

    def __init__(
        self,
        dataset: str,
        max_prompt_chars: int = 160,
        max_answer_chars: int = 24,
        test_fraction: float = 0.1,
        max_draws_per_task: int = 50,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.dataset = check_dataset(dataset)
        if not isinstance(max_prompt_chars, int) or max_prompt_chars < 8:
            raise ValueError(f"max_prompt_chars: must be an int >= 8, got {max_prompt_chars!r}")
        if not isinstance(max_answer_chars, int) or max_answer_chars < 1:
            raise ValueError(f"max_answer_chars: must be an int >= 1, got {max_answer_chars!r}")
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction: must be in (0, 1), got {test_fraction!r}")
        self.max_prompt_chars = max_prompt_chars
        self.max_answer_chars = max_answer_chars
        self.test_fraction = float(test_fraction)
        self.max_draws_per_task = max_draws_per_task
        self.config = dict(config or {})

    def train(self, n: int, seed: int) -> list[Task]:
        """`n` training tasks (repeats allowed), deterministic in `seed`."""
        return self._collect(n, _TRAIN_SEED_BASE + seed * _SEED_STRIDE, test=False)

    def test(self, n: int, seed: int) -> list[Task]:
        """`n` distinct held-out tasks, deterministic in `seed`."""
        return self._collect(n, _TEST_SEED_BASE + seed * _SEED_STRIDE, test=True)

    def _collect(self, n: int, dataset_seed: int, test: bool) -> list[Task]:
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n: must be a non-negative int, got {n!r}")
        data = _dataset(self.dataset, dataset_seed % 2**32, self.config)
        tasks: list[Task] = []
        seen: set[str] = set()
        for index in range(min(n * self.max_draws_per_task, _DATASET_SIZE)):
            if len(tasks) == n:
                break
            entry = data[index]
            if not _fits(entry, self.max_prompt_chars, self.max_answer_chars):
                continue
            prompt = f"{entry['question']}\n"
            if in_test_split(prompt, self.test_fraction) != test or (test and prompt in seen):
                continue
            seen.add(prompt)
            tasks.append(self._task(prompt, entry, dataset_seed, index))
        if len(tasks) < n:
            raise ValueError(
                f"reasoning_gym:{self.dataset}: only {len(tasks)} of {n} tasks fit "
                f"max_prompt_chars={self.max_prompt_chars}, max_answer_chars="
                f"{self.max_answer_chars}; most reasoning-gym prompts are long for the tiny "
                f"policy -- raise the limits or pick one of {', '.join(SHORT_DATASETS)}"
            )
        return tasks

    def _task(self, prompt: str, entry: dict[str, Any], seed: int, index: int) -> Task:
        return Task(
            task_id=stable_id(f"rg_{self.dataset}", prompt),
            prompt=prompt,
            answer=str(entry["answer"]),
            meta={
                "env": f"reasoning_gym:{self.dataset}",
                "dataset": self.dataset,
                "dataset_seed": seed % 2**32,
                "index": index,
                "config": self.config,
            },
        )


def entry_of(task: Task) -> tuple[Any, dict[str, Any]]:
    """The dataset and the entry a task came from (rebuilt from its seed and index)."""
    meta = task.meta
    data = _dataset(meta["dataset"], meta["dataset_seed"], meta.get("config", {}))
    entry = data[meta["index"]]
    if f"{entry['question']}\n" != task.prompt:
        raise ValueError(f"task {task.task_id}: its dataset entry no longer matches the prompt")
    return data, entry


class ReasoningGymEnv(Environment):
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
        self.dataset = check_dataset(dataset)
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns: must be an int >= 1, got {max_turns!r}")
        self.max_turns = max_turns
        self.binary_reward = bool(binary_reward)
        self.max_output_chars = max_output_chars
        self._task: Task | None = None
        self._scored: tuple[Any, dict[str, Any]] | None = None
        self._turn = 0
        self._done = False

    def reset(self, task: Task) -> str:
        """Start an episode for `task`; returns its prompt."""
        if not isinstance(task, Task):
            raise TypeError(f"task: expected Task, got {type(task)}")
        if task.meta.get("dataset") != self.dataset:
            raise ValueError(
                f"task.meta['dataset']: expected {self.dataset!r}, got {task.meta.get('dataset')!r}"
            )
        self._scored = entry_of(task)
        self._task, self._turn, self._done = task, 0, False
        return task.prompt

    def step(self, action_text: str) -> StepResult:
        """Score the text inside the answer tags; anything else is a format error."""
        if self._task is None or self._scored is None:
            raise RuntimeError("ReasoningGymEnv.step: call reset(task) first")
        if self._done:
            raise RuntimeError("ReasoningGymEnv.step: the episode has ended; call reset(task)")
        self._turn += 1
        parsed = parse_action(action_text)
        info: dict[str, Any] = {
            "turn": self._turn,
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
            return self._finish(reward, info)
        if self._turn >= self.max_turns:
            info.update(end_reason=END_MAX_TURNS, correct=False)
            return self._finish(0.0, info)
        message = FORMAT_ERROR_MESSAGES[info["format_error"]]
        return StepResult(wrap_output(message, self.max_output_chars), 0.0, False, info)

    def _finish(self, reward: float, info: dict[str, Any]) -> StepResult:
        self._done = True
        return StepResult("", reward, True, info)


def corrupt(answer: str, rng: random.Random) -> str:
    """A plausible wrong answer: one digit or letter changed (or a `1` appended)."""
    positions = [i for i, ch in enumerate(answer) if ch.isalnum()]
    if not positions:
        return answer + "1"
    i = rng.choice(positions)
    pool = "0123456789" if answer[i].isdigit() else "abcdefghijklmnopqrstuvwxyz"
    swap = rng.choice([c for c in pool if c != answer[i].lower()])
    return answer[:i] + (swap.upper() if answer[i].isupper() else swap) + answer[i + 1 :]


def demonstrations(
    dataset: str, n: int, seed: int, p_wrong: float = 0.3, **source_options: Any
) -> list[tuple[list[tuple[str, bool]], float]]:
    """`n` single-turn demonstrations with their rewards: the answer, wrong with `p_wrong`.

    Returns `(segments, reward)` pairs; segments are `[(prompt, False), (answer action, True)]`.
    """
    if not 0.0 <= p_wrong <= 1.0:
        raise ValueError(f"p_wrong: must be a probability, got {p_wrong!r}")
    tasks = ReasoningGymTaskSource(dataset, **source_options).train(n, seed)
    env = ReasoningGymEnv(dataset)
    rng = random.Random(seed * 7919 + 31)
    demos = []
    for task in tasks:
        answer = corrupt(task.answer, rng) if rng.random() < p_wrong else task.answer
        action = f"{ANSWER_OPEN}{answer}{ANSWER_CLOSE}"
        env.reset(task)
        demos.append(([(task.prompt, False), (action, True)], env.step(action).reward))
    return demos


def main(argv: list[str] | None = None) -> None:
    """Print the teacher's mean reward and prompt lengths for one dataset."""
    parser = argparse.ArgumentParser(description="reasoning_gym teacher statistics")
    parser.add_argument("--dataset", default="basic_arithmetic")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    demos = demonstrations(args.dataset, args.n, args.seed)
    lengths = [len(segments[0][0]) + len(segments[1][0]) for segments, _ in demos]
    print(f"reasoning_gym:{args.dataset}: {len(demos)} demonstrations (seed {args.seed})")
    print(f"teacher mean reward {sum(r for _, r in demos) / len(demos):.3f}")
    print(f"exactly right       {sum(r == 1.0 for _, r in demos) / len(demos):.3f}")
    print(f"chars mean / max    {sum(lengths) / len(lengths):.1f} / {max(lengths)}")
    print("example:")
    print(demos[0][0][0][0] + demos[0][0][1][0])


if __name__ == "__main__":
    main()
