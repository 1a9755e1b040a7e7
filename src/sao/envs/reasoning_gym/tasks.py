"""`reasoning_gym:<dataset>` tasks: the short entries of one reasoning-gym dataset.

Train and test come from different dataset seeds, far apart, and test prompts must also hash into
the test split (`sao.envs.base.in_test_split`), so the two never share a prompt. Most
reasoning-gym prompts are long (hundreds of characters of instructions) for the tiny
character-level policy; the task source keeps only entries whose prompt and answer are short
printable ASCII (`max_prompt_chars`, `max_answer_chars`) and fails clearly when a dataset has too
few such entries.

The library is optional: `pip install -e '.[gym]'` installs it; it is imported on first use.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from sao.envs.base import Task, TaskSource, in_test_split, stable_id

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
