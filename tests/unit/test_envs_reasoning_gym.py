"""`reasoning_gym:<dataset>`: short tasks, disjoint splits, the library's own scoring, demos."""

from __future__ import annotations

import random
import sys

import pytest

from sao.envs.base import END_ANSWER, END_MAX_TURNS, in_test_split
from sao.envs.demonstration import TeacherTrajectory
from sao.envs.reasoning_gym.env import ReasoningGymEnv
from sao.envs.reasoning_gym.tasks import ReasoningGymTaskSource, check_dataset, entry_of
from sao.envs.reasoning_gym.teacher import corrupt, demonstrations
from sao.envs.registry import make_demonstrations, make_env, make_task_source

pytest.importorskip("reasoning_gym", reason="the optional `gym` extra is not installed")

DATASET = "basic_arithmetic"


def test_missing_library_names_the_gym_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    with pytest.raises(ImportError, match=r"\.\[gym\]"):
        check_dataset(DATASET)


def test_unknown_dataset_lists_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown.*basic_arithmetic"):
        ReasoningGymTaskSource("no_such_dataset")
    with pytest.raises(ValueError, match="unknown"):
        make_env("reasoning_gym:no_such_dataset")


def test_tasks_are_short_deterministic_and_split_disjointly() -> None:
    source = ReasoningGymTaskSource(DATASET)
    train = source.train(300, seed=0)
    test = source.test(50, seed=0)
    assert [t.prompt for t in train] == [t.prompt for t in source.train(300, seed=0)]
    assert len({t.prompt for t in test}) == 50
    assert not {t.prompt for t in train} & {t.prompt for t in test}
    assert all(in_test_split(t.prompt, 0.1) for t in test)
    assert not any(in_test_split(t.prompt, 0.1) for t in train)
    assert all(len(t.prompt) <= 160 and t.prompt.isascii() for t in train + test)
    assert (
        train[0].meta["dataset"] == DATASET and train[0].answer == entry_of(train[0])[1]["answer"]
    )


def test_long_prompt_datasets_fail_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="long for the tiny policy"):
        ReasoningGymTaskSource("leg_counting").train(5, seed=0)


def test_scripted_perfect_agent_earns_one_and_wrong_answers_zero() -> None:
    env = ReasoningGymEnv(DATASET)
    for task in ReasoningGymTaskSource(DATASET).test(20, seed=1):
        assert env.reset(task) == task.prompt
        result = env.step(f"<answer> {task.answer} </answer>")
        assert (result.reward, result.done, result.info["end_reason"]) == (1.0, True, END_ANSWER)
        env.reset(task)
        wrong = corrupt(task.answer, random.Random(0))
        assert env.step(f"<answer>{wrong}</answer>").reward == 0.0


@pytest.mark.parametrize("action", ["42", "<answer>42", "<python>print(1)</python>", ""])
def test_malformed_actions_earn_zero_without_crashing(action: str) -> None:
    env = ReasoningGymEnv(DATASET)
    env.reset(ReasoningGymTaskSource(DATASET).train(1, seed=0)[0])
    result = env.step(action)
    assert (result.reward, result.done, result.info["end_reason"]) == (0.0, True, END_MAX_TURNS)
    assert result.info["format_error"] is not None


def test_a_failing_scorer_is_a_counted_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    task = ReasoningGymTaskSource(DATASET).train(1, seed=0)[0]
    env = ReasoningGymEnv(DATASET)
    env.reset(task)
    data, _ = entry_of(task)

    def broken(answer: str, entry: dict) -> float:
        raise RuntimeError("scorer bug")

    monkeypatch.setattr(data, "score_answer", broken)
    result = env.step(f"<answer>{task.answer}</answer>")
    assert result.reward == 0.0 and result.info["score_error"] == "RuntimeError: scorer bug"


def test_partial_credit_is_kept_unless_binary() -> None:
    task = ReasoningGymTaskSource("spell_backward").train(1, seed=0)[0]
    wrong_last = task.answer[:-1] + ("a" if task.answer[-1] != "a" else "b")
    expected = (len(task.answer) - 1) / len(task.answer)
    env = ReasoningGymEnv("spell_backward")
    env.reset(task)
    assert env.step(f"<answer>{wrong_last}</answer>").reward == pytest.approx(expected)
    binary = ReasoningGymEnv("spell_backward", binary_reward=True)
    binary.reset(task)
    result = binary.step(f"<answer>{wrong_last}</answer>")
    assert (result.reward, result.info["score"]) == (0.0, pytest.approx(expected))


def test_env_rejects_a_task_of_another_dataset() -> None:
    task = ReasoningGymTaskSource("chain_sum").train(1, seed=0)[0]
    with pytest.raises(ValueError, match="dataset"):
        ReasoningGymEnv(DATASET).reset(task)


def test_corrupt_changes_one_character() -> None:
    rng = random.Random(3)
    for answer in ("-204", "17", "abc", "3/4"):
        wrong = corrupt(answer, rng)
        assert wrong != answer and len(wrong) == len(answer)
        assert sum(a != b for a, b in zip(wrong, answer, strict=True)) == 1
    assert corrupt("-", rng) == "-1"


def test_demonstrations_are_imperfect() -> None:
    demos = demonstrations(DATASET, 1000, seed=0)
    assert all(isinstance(demo, TeacherTrajectory) for demo in demos)
    accuracy = sum(demo.reward for demo in demos) / len(demos)
    assert 0.62 <= accuracy <= 0.78
    segments = demos[0].segments()
    assert segments[0][1] is False and segments[1][1] is True
    assert segments[1][0].startswith("<answer>") and segments[1][0].endswith("</answer>")


def test_registry_builds_reasoning_gym() -> None:
    env = make_env(f"reasoning_gym:{DATASET}", max_turns=2)
    assert isinstance(env, ReasoningGymEnv) and env.max_turns == 2
    source = make_task_source(f"reasoning_gym:{DATASET}", max_prompt_chars=60)
    assert all(len(t.prompt) <= 60 for t in source.train(20, seed=0))
    assert len(make_demonstrations(f"reasoning_gym:{DATASET}", 4, seed=0)) == 4
    with pytest.raises(ValueError, match="variant"):
        make_env("reasoning_gym")
