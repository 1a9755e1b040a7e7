"""`calc` task generation and the disjoint train/test split."""

from __future__ import annotations

import itertools
import random

import pytest

from sao.envs.base import HashSplitTaskSource, Task, TaskSource, in_test_split
from sao.envs.calc.problems import DIFFICULTIES, evaluate_expression, generate_problem
from sao.envs.calc.tasks import CalcTaskSource
from sao.envs.code_repair.tasks import CodeRepairTaskSource


def test_train_and_test_splits_are_disjoint() -> None:
    source = CalcTaskSource()
    train_prompts = {t.prompt for seed in range(3) for t in source.train(1000, seed)}
    test_prompts = {t.prompt for t in source.test(300, seed=0)}
    assert train_prompts.isdisjoint(test_prompts)
    assert all(in_test_split(p, 0.1) for p in test_prompts)
    assert not any(in_test_split(p, 0.1) for p in train_prompts)


def test_split_holds_out_about_the_requested_fraction() -> None:
    rng = random.Random(0)
    prompts = [f"Q: {generate_problem(rng, 2).question}\n" for _ in range(4000)]
    held_out = sum(in_test_split(p, 0.1) for p in prompts) / len(prompts)
    assert 0.08 < held_out < 0.12


def test_tasks_are_deterministic_in_the_seed() -> None:
    source = CalcTaskSource()
    assert source.train(50, seed=7) == source.train(50, seed=7)
    assert source.train(50, seed=7) != source.train(50, seed=8)


def test_test_tasks_are_distinct() -> None:
    tasks = CalcTaskSource(difficulties=(1,)).test(500, seed=3)
    assert len({t.prompt for t in tasks}) == 500


def test_answers_are_integers_equal_to_the_expression() -> None:
    rng = random.Random(1)
    for difficulty in DIFFICULTIES:
        for _ in range(300):
            problem = generate_problem(rng, difficulty)
            assert evaluate_expression(problem.expression) == problem.answer
            assert isinstance(problem.answer, int) and problem.answer > 0
            if problem.kind == "arith":
                assert problem.question == f"{problem.expression}=?"


def test_known_problem_values() -> None:
    assert evaluate_expression("347*29+18") == 10081
    assert evaluate_expression("(48213-967)*53") == 2504038
    assert evaluate_expression("2236/43+5120") == 5172.0


def test_evaluate_expression_rejects_code() -> None:
    with pytest.raises(ValueError, match="expression"):
        evaluate_expression("__import__('os')")
    with pytest.raises(ValueError, match="expression"):
        evaluate_expression("2**10")


def test_difficulty_controls_the_problem_shape() -> None:
    rng = random.Random(2)
    level1 = [generate_problem(rng, 1) for _ in range(200)]
    level3 = [generate_problem(rng, 3) for _ in range(200)]
    level4 = [generate_problem(rng, 4) for _ in range(200)]
    assert all(sum(ch in "+-*/" for ch in p.expression) == 1 for p in level1)
    assert all(sum(ch in "+-*/" for ch in p.expression) >= 2 for p in level3)
    assert {p.kind for p in level4} == {"word"}
    assert max(p.answer for p in level3) > 100_000 > max(p.answer for p in level1)


def test_prompts_are_short_ascii_questions() -> None:
    for task in CalcTaskSource().train(500, seed=4):
        assert task.prompt.startswith("Q: ") and task.prompt.endswith("\n")
        assert len(task.prompt) <= 100
        assert all(" " <= ch <= "~" for ch in task.prompt[:-1])
        assert task.meta["env"] == "calc"
        assert task.task_id.startswith("calc-")


def test_equal_prompts_share_an_id() -> None:
    source = CalcTaskSource(difficulties=(1,))
    tasks = source.train(3000, seed=5)
    ids_by_prompt: dict[str, set[str]] = {}
    for task in tasks:
        ids_by_prompt.setdefault(task.prompt, set()).add(task.task_id)
    assert all(len(ids) == 1 for ids in ids_by_prompt.values())
    assert len({t.task_id for t in tasks}) == len(ids_by_prompt)


def test_stream_yields_tasks_of_the_split_without_end() -> None:
    stream = CalcTaskSource().stream("test", seed=0, chunk=16)
    tasks = [next(stream) for _ in range(40)]
    assert all(in_test_split(t.prompt, 0.1) for t in tasks)
    with pytest.raises(ValueError, match="split"):
        next(CalcTaskSource().stream("valid", seed=0))


@pytest.mark.parametrize("source", [CalcTaskSource(), CodeRepairTaskSource()])
def test_the_training_stream_does_not_replay_the_demonstration_tasks(source: TaskSource) -> None:
    # Warm-start demonstrations are drawn with `train(n, 0)`; RL must not open on them in order.
    demonstrated = [t.task_id for t in source.train(64, seed=0)]
    streamed = [t.task_id for t in itertools.islice(source.stream("train", seed=0, chunk=16), 64)]
    matches = sum(a == b for a, b in zip(demonstrated, streamed, strict=True))
    assert matches < 8, matches
    # Same seed, same stream; another seed, another stream.
    again = [t.task_id for t in itertools.islice(source.stream("train", seed=0, chunk=16), 64)]
    other = [t.task_id for t in itertools.islice(source.stream("train", seed=1, chunk=16), 64)]
    assert streamed == again and streamed != other


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"difficulties": (5,)}, "difficulties"),
        ({"difficulties": ()}, "difficulties"),
        ({"test_fraction": 1.0}, "test_fraction"),
        ({"test_fraction": 0}, "test_fraction"),
    ],
)
def test_bad_source_arguments_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        CalcTaskSource(**kwargs)


def test_bad_counts_name_the_field() -> None:
    with pytest.raises(ValueError, match="n:"):
        CalcTaskSource().train(-1, seed=0)
    with pytest.raises(TypeError, match="seed"):
        CalcTaskSource().train(1, seed="0")  # type: ignore[arg-type]


def test_an_exhausted_prompt_space_fails_instead_of_hanging() -> None:
    class TwoPrompts(HashSplitTaskSource):
        def generate(self, rng: random.Random) -> Task:
            text = f"Q: {rng.choice('ab')}\n"
            return Task(task_id=text.strip(), prompt=text, answer="1")

    source = TwoPrompts(test_fraction=0.5, max_draws_per_task=20)
    with pytest.raises(ValueError, match="prompt space is too small"):
        source.test(3, seed=0)


def test_task_validates_its_fields() -> None:
    with pytest.raises(ValueError, match="task_id"):
        Task(task_id="", prompt="Q", answer="1")
    with pytest.raises(TypeError, match="answer"):
        Task(task_id="x", prompt="Q", answer=1)  # type: ignore[arg-type]
