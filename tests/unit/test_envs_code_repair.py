"""The `code_repair` environment: commands, seeded bugs, tasks, the sandboxed tests, the teacher."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sao.envs.base import END_ANSWER, END_MAX_TURNS, Task
from sao.envs.code_repair.bugs import behaviour, line_mutations, variables_of
from sao.envs.code_repair.env import CodeRepairEnv
from sao.envs.code_repair.protocol import (
    Command,
    apply_replace,
    build_harness,
    numbered,
    parse_command,
    read_report,
    split_harness,
)
from sao.envs.code_repair.tasks import CodeRepairTaskSource
from sao.envs.code_repair.teacher import (
    CodeRepairTeacher,
    TrustedHarnessRunner,
    demonstrations,
    replace_action,
    summarize,
)
from sao.envs.registry import make_demonstrations, make_env, make_task_source

SOURCE = "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return lo\n    return x\n"
TASK = Task(
    task_id="cr-t",
    prompt="Fix the bug. clamp(x, lo, hi) returns x limited to lo..hi.\n",
    answer=SOURCE.replace("return lo\n    return x", "return hi\n    return x"),
    meta={
        "source": SOURCE,
        "entry": "clamp",
        "bug_line": 5,
        "fix": ["        return hi"],
        "visible_tests": [[[5, 0, 3], 3], [[1, 0, 3], 1]],
        "hidden_tests": [[[-2, 0, 3], 0], [[9, 2, 4], 4]],
    },
)
FIX = "<tool>replace 5\n        return hi</tool>"


@dataclass
class Canned:
    """A sandbox result for tests that must not run code."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = 0
    timed_out: bool = False
    error: str | None = None


def never_called(code: str, *, timeout_s: float, memory_mb: int) -> Canned:
    raise AssertionError("the runner must not be called")


# ----------------------------------------------------------------------------- protocol
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<tool>view</tool>", Command("view")),
        ("thinking <tool> test \n</tool>", Command("test")),
        ("<tool>submit</tool>", Command("submit")),
        ("<tool>replace 3\n    return a\n</tool>", Command("replace", 3, ("    return a",))),
        ("<tool>replace 2\n  a\n  b</tool>", Command("replace", 2, ("  a", "  b"))),
        ("<tool>replace x\n  a</tool>", Command("error", error="bad_line_number")),
        ("<tool>replace 2\n   </tool>", Command("error", error="empty_replacement")),
        ("<tool>delete 2</tool>", Command("error", error="unknown_command")),
        ("<tool>view", Command("error", error="unclosed_tool")),
        ("<answer>3</answer>", Command("error", error="no_tag")),
    ],
)
def test_parse_command(text: str, expected: Command) -> None:
    assert parse_command(text) == expected


def test_numbered_and_apply_replace() -> None:
    lines = ["def f(x):", "    return x", "", "def g():"]
    assert numbered(lines) == "1 def f(x):\n2     return x\n3\n4 def g():"
    edited, error = apply_replace(lines, 2, ["    if x:", "        return 1"], 20, 80)
    assert error is None
    assert edited == ["def f(x):", "    if x:", "        return 1", "", "def g():"]
    assert apply_replace(lines, 5, ["a"], 20, 80) == (lines, "line_out_of_range")
    assert apply_replace(lines, 0, ["a"], 20, 80) == (lines, "line_out_of_range")
    assert apply_replace(lines, 1, ["a" * 81], 20, 80) == (lines, "line_too_long")
    assert apply_replace(lines, 1, ["a", "b"], 4, 80) == (lines, "file_too_long")


def _run_in_process(code: str) -> str:
    """Run a harness around our own module source, in process."""
    runner = TrustedHarnessRunner()
    parts = split_harness(code)
    assert parts is not None
    runner.trust(parts[0])
    return runner(code, timeout_s=1, memory_mb=64).stdout


def test_harness_reports_passes_and_the_first_failure() -> None:
    code = build_harness(SOURCE, "clamp", TASK.meta["visible_tests"], "n0nce")
    report = read_report(_run_in_process(code), "n0nce")
    assert report is not None
    assert (report.passed, report.total, report.all_passed) == (1, 2, False)
    assert report.summary == "1/2 passed\nclamp(5, 0, 3) gave 0, want 3"
    broken = build_harness("def clamp(:\n", "clamp", [[[1], 1]], "n0nce")
    report = read_report(_run_in_process(broken), "n0nce")
    assert report is not None and report.summary == "error: SyntaxError on line 1"
    assert read_report("1 1 1\n", "n0nce") is None


def test_harness_shows_the_first_tests_and_reports_the_whole_suite_after_them() -> None:
    tests = TASK.meta["visible_tests"] + TASK.meta["hidden_tests"]
    code = build_harness(SOURCE, "clamp", tests, "n0nce", shown=2)
    out = _run_in_process(code)
    assert out.splitlines()[-1] == "n0nce suite 2 4"
    report = read_report(out, "n0nce")
    assert report is not None
    assert (report.passed, report.total, report.all_passed) == (1, 2, False)
    assert report.summary == "1/2 passed\nclamp(5, 0, 3) gave 0, want 3"
    assert (report.suite_passed, report.suite_total, report.suite_all_passed) == (2, 4, False)
    # Everything shown: no suite line, and no suite verdict.
    report = read_report(_run_in_process(build_harness(SOURCE, "clamp", tests, "n0nce")), "n0nce")
    assert report is not None and (report.total, report.suite_all_passed) == (4, None)
    # A module that does not load fails the suite too, with the shown error summary.
    broken = read_report(
        _run_in_process(build_harness("def clamp(:\n", "clamp", tests, "n0nce", 2)), "n0nce"
    )
    assert broken is not None and broken.summary == "error: SyntaxError on line 1"
    assert (broken.suite_passed, broken.suite_total) == (0, 4)
    # The visible report survives a run cut short before the suite line.
    cut = read_report("n0nce 2 2\n2/2 passed\n", "n0nce")
    assert cut is not None and (cut.all_passed, cut.suite_all_passed) == (True, None)
    with pytest.raises(ValueError, match="shown"):
        build_harness(SOURCE, "clamp", tests, "n0nce", shown=5)


def test_trusted_runner_refuses_code_it_was_not_given() -> None:
    runner = TrustedHarnessRunner()
    with pytest.raises(ValueError, match="teacher's own modules"):
        runner(build_harness(SOURCE, "clamp", [[[1, 0, 3], 1]], "n"), timeout_s=1, memory_mb=64)
    with pytest.raises(ValueError, match="teacher's own modules"):
        runner("print('hi')", timeout_s=1, memory_mb=64)


# ----------------------------------------------------------------------------- seeded bugs
def test_line_mutations_per_family() -> None:
    names = ["x", "lo", "hi"]
    assert line_mutations("    if x < lo:", "wrong_comparison", names) == [
        "    if x <= lo:",
        "    if x > lo:",
    ]
    assert line_mutations("    for i in range(1, n + 1):", "off_by_one", names) == [
        "    for i in range(2, n + 1):",
        "    for i in range(0, n + 1):",
        "    for i in range(1, n):",
        "    for i in range(1, n + 2):",
    ]
    assert line_mutations("    return power(x, 3) - c", "swapped_arguments", names) == [
        "    return power(3, x) - c"
    ]
    assert line_mutations("        return a - b", "swapped_arguments", names) == [
        "        return b - a"
    ]
    assert line_mutations("    s = s + x", "wrong_operator", names) == [
        "    s = s - x",
        "    s = s * x",
        "    s = s // x",
    ]
    assert line_mutations("    return lo", "wrong_variable", names) == [
        "    return x",
        "    return hi",
    ]
    assert line_mutations("def clamp(x, lo, hi):", "wrong_variable", names) == []
    with pytest.raises(ValueError, match="family"):
        line_mutations("x", "typo", names)


def test_variables_and_behaviour() -> None:
    assert variables_of(SOURCE.splitlines()) == ["x", "lo", "hi"]
    assert behaviour(SOURCE, "clamp", [(5, 0, 3), (1, 0, 3)]) == [("ok", 0), ("ok", 1)]
    assert behaviour("def f(xs):\n    return xs[0]\n", "f", [([],)]) == [("raise", "IndexError")]
    assert behaviour("def f(:\n", "f", [()]) is None
    assert behaviour("x = 1\n", "f", [()]) is None


# ----------------------------------------------------------------------------- tasks
def test_tasks_are_deterministic_fixable_and_exposed_by_a_visible_test() -> None:
    source = CodeRepairTaskSource()
    tasks = source.train(60, seed=3)
    assert [t.prompt for t in tasks] == [t.prompt for t in source.train(60, seed=3)]
    for task in tasks:
        meta = task.meta
        lines = meta["source"].removesuffix("\n").split("\n")
        assert task.prompt.endswith(numbered(lines) + "\n")
        fixed, error = apply_replace(lines, meta["bug_line"], meta["fix"], 20, 80)
        assert error is None and "\n".join(fixed) + "\n" == task.answer
        tests = meta["visible_tests"] + meta["hidden_tests"]
        assert len(meta["visible_tests"]) == 3 and len(tests) >= 4
        calls = [tuple(args) for args, _ in tests]
        assert behaviour(task.answer, meta["entry"], calls) == [("ok", want) for _, want in tests]
        buggy = behaviour(meta["source"], meta["entry"], calls[:3])
        visible = meta["visible_tests"]
        assert buggy is not None and any(
            got != ("ok", w) for got, (_, w) in zip(buggy, visible, strict=True)
        )


def test_splits_are_disjoint_and_families_can_be_restricted() -> None:
    source = CodeRepairTaskSource()
    train = {t.prompt for t in source.train(400, seed=0)}
    test = source.test(40, seed=0)
    assert len({t.prompt for t in test}) == 40 and not train & {t.prompt for t in test}
    only = CodeRepairTaskSource(families=["missing_edge_case"]).train(10, seed=1)
    assert {t.meta["family"] for t in only} == {"missing_edge_case"}
    assert {t.meta["template"] for t in only} <= {"largest", "smallest", "mean", "last"}
    with pytest.raises(ValueError, match="templates"):
        CodeRepairTaskSource(templates=["nope"])
    with pytest.raises(ValueError, match="families"):
        CodeRepairTaskSource(families=["typo"])


# ----------------------------------------------------------------------------- environment
def test_scripted_perfect_agent_earns_one_in_the_sandbox() -> None:
    env = CodeRepairEnv()
    assert env.reset(TASK) == TASK.prompt
    assert env.step("<tool>test</tool>").observation == (
        "<output>1/2 passed\nclamp(5, 0, 3) gave 0, want 3</output>"
    )
    assert env.step(FIX).observation == "<output>ok</output>"
    assert env.step("<tool>view</tool>").observation.endswith(
        "5         return hi\n6     return x</output>"
    )
    assert env.step("<tool>test</tool>").observation == "<output>2/2 passed</output>"
    final = env.step("<tool>submit</tool>")
    assert (final.reward, final.done, final.observation) == (1.0, True, "")
    assert final.info["end_reason"] == END_ANSWER and final.info["correct"] is True
    assert final.info["events"] == ["test_failed", "replace", "view", "test_passed", "submit"]


def test_generated_tasks_solved_by_their_fix_in_the_sandbox() -> None:
    env = CodeRepairEnv()
    for task in CodeRepairTaskSource().test(3, seed=5):
        env.reset(task)
        env.step(replace_action(task.meta["bug_line"], task.meta["fix"]))
        assert env.step("<tool>submit</tool>").reward == 1.0


def test_submitting_the_bug_or_hostile_code_earns_zero() -> None:
    env = CodeRepairEnv(timeout_s=1.0)
    env.reset(TASK)
    assert env.step("<tool>submit</tool>").reward == 0.0
    hostile = {
        "        while True: pass": "timeout",
        "        import sys; sys.exit(0)": "unfinished",
        "        print('n 4 4')": None,
        "    return": None,
    }
    for line, tool_error in hostile.items():
        env.reset(TASK)
        env.step(f"<tool>replace 5\n{line}</tool>")
        result = env.step("<tool>submit</tool>")
        assert (result.reward, result.info["tool_error"]) == (0.0, tool_error), line


class CountingInProcess:
    """Runs the harness in process (our own test sources only) and counts the runs."""

    def __init__(self, stdout_cut: bool = False) -> None:
        self.runs = 0
        self.stdout_cut = stdout_cut

    def __call__(self, code: str, *, timeout_s: float, memory_mb: int) -> Canned:
        self.runs += 1
        stdout = _run_in_process(code)
        if self.stdout_cut:  # as if the run timed out while the hidden tests ran
            stdout = "\n".join(line for line in stdout.splitlines() if " suite " not in line)
        return Canned(stdout=stdout, timed_out=self.stdout_cut)


HIDDEN_ONLY_BUG = "<tool>replace 2\n    if x < lo - 5:</tool>"  # passes both visible tests


@pytest.mark.parametrize("reuse", [True, False])
def test_submit_of_the_tested_file_reuses_the_test_run(reuse: bool) -> None:
    runner = CountingInProcess()
    env = CodeRepairEnv(runner=runner, reuse_test_runs=reuse)
    seen = []
    for actions in (
        [FIX, "<tool>test</tool>", "<tool>submit</tool>"],
        [HIDDEN_ONLY_BUG, FIX, "<tool>test</tool>", "<tool>submit</tool>"],
        ["<tool>test</tool>", "<tool>submit</tool>"],
        ["<tool>test</tool>", FIX, "<tool>submit</tool>"],  # edited after the test: a fresh run
    ):
        env.reset(TASK)
        seen.append([env.step(action) for action in actions])
    rewards = [episode[-1].reward for episode in seen]
    assert rewards == [1.0, 0.0, 0.0, 1.0]
    assert seen[1][-2].observation == "<output>2/2 passed</output>"
    assert runner.runs == (5 if reuse else 8)


def test_a_suite_cut_short_at_test_is_run_again_at_submit() -> None:
    runner = CountingInProcess(stdout_cut=True)
    env = CodeRepairEnv(runner=runner)
    env.reset(TASK)
    env.step(FIX)
    assert env.step("<tool>test</tool>").observation == "<output>2/2 passed</output>"
    assert runner.runs == 1
    assert env.step("<tool>submit</tool>").reward == 1.0
    assert runner.runs == 2


def test_a_hang_in_the_hidden_tests_keeps_the_visible_report_in_the_sandbox() -> None:
    env = CodeRepairEnv(timeout_s=1.0)
    env.reset(TASK)
    env.step(FIX)
    env.step("<tool>replace 3\n        while True: pass</tool>")  # hangs only for x < lo
    assert env.step("<tool>test</tool>").observation == "<output>2/2 passed</output>"
    final = env.step("<tool>submit</tool>")
    assert (final.reward, final.info["tool_error"]) == (0.0, "timeout")


def test_malformed_actions_cost_turns_and_end_at_max_turns() -> None:
    env = CodeRepairEnv(max_turns=4, runner=never_called, grade_unsubmitted=False)
    env.reset(TASK)
    assert env.step("no tag").observation == "<output>error: no tool tag</output>"
    result = env.step("<tool>replace 99\n  x</tool>")
    assert result.observation == "<output>error: no such line</output>"
    assert result.info["format_error"] == "line_out_of_range"
    assert env.lines == SOURCE.removesuffix("\n").split("\n")
    assert env.step("<tool>rm -rf</tool>").info["format_error"] == "unknown_command"
    last = env.step("<tool>view</tool>")
    assert (last.reward, last.done, last.info["end_reason"]) == (0.0, True, END_MAX_TURNS)
    assert last.info["events"] == ["error", "replace", "error", "view"]
    with pytest.raises(RuntimeError, match="ended"):
        env.step("<tool>view</tool>")


def test_malformed_actions_earn_the_malformed_reward_apart_from_the_outcome() -> None:
    env = CodeRepairEnv(max_turns=4)  # malformed_reward -0.1 by default
    env.reset(TASK)
    rewards = [
        env.step(action).action_reward
        for action in ("no tag", "<tool>replace 99\n  x</tool>", "<tool>view</tool>")
    ]
    assert rewards == [-0.1, -0.1, 0.0]
    last = env.step(FIX.replace("replace 5", "replace"))  # the line number left out
    assert (last.done, last.info["end_reason"], last.action_reward) == (True, END_MAX_TURNS, -0.1)
    assert last.reward == 0.0  # the outcome: the file left as it was
    env.reset(TASK)
    fixed = env.step(FIX)
    assert fixed.action_reward == 0.0
    assert env.step("<tool>submit</tool>").reward == 1.0
    outcome_only = CodeRepairEnv(max_turns=2, runner=never_called, malformed_reward=0)
    outcome_only.reset(TASK)
    assert outcome_only.step("no tag").action_reward == 0.0


def test_running_out_of_turns_earns_the_unsubmitted_reward_beside_the_grade() -> None:
    env = CodeRepairEnv(max_turns=2, unsubmitted_reward=-0.2)
    env.reset(TASK)
    assert env.step(FIX).action_reward == 0.0
    graded = env.step("<tool>view</tool>")
    assert (graded.reward, graded.info["end_reason"], graded.action_reward) == (
        1.0,
        END_MAX_TURNS,
        -0.2,
    )
    env.reset(TASK)
    env.step("<tool>view</tool>")
    malformed_last = env.step("no tag")
    assert (malformed_last.reward, malformed_last.action_reward) == (0.0, pytest.approx(-0.3))
    env.reset(TASK)
    env.step(FIX)
    submitted = env.step("<tool>submit</tool>")
    assert (submitted.reward, submitted.action_reward) == (1.0, 0.0)
    assert CodeRepairEnv().unsubmitted_reward == 0.0


def test_out_of_turns_grades_the_file_the_episode_leaves() -> None:
    env = CodeRepairEnv(max_turns=2)
    env.reset(TASK)
    assert env.step(FIX).observation == "<output>ok</output>"
    last = env.step("<tool>view</tool>")
    assert (last.reward, last.done, last.info["end_reason"]) == (1.0, True, END_MAX_TURNS)
    assert (last.info["correct"], last.info["tool_error"]) == (True, None)


def test_the_last_turns_edit_is_graded_and_a_buggy_file_earns_nothing() -> None:
    env = CodeRepairEnv(max_turns=1)
    env.reset(TASK)
    fixed_on_the_last_turn = env.step(FIX)
    assert (fixed_on_the_last_turn.reward, fixed_on_the_last_turn.info["correct"]) == (1.0, True)
    assert env.lines[4] == "        return hi"
    env.reset(TASK)
    left_buggy = env.step("<tool>test</tool>")
    assert (left_buggy.reward, left_buggy.info["correct"]) == (0.0, False)
    assert left_buggy.info["end_reason"] == END_MAX_TURNS


def test_without_grading_only_a_submit_earns() -> None:
    env = CodeRepairEnv(max_turns=2, runner=never_called, grade_unsubmitted=False)
    env.reset(TASK)
    env.step(FIX)
    last = env.step("<tool>view</tool>")
    assert (last.reward, last.info["correct"], last.info["end_reason"]) == (
        0.0,
        False,
        END_MAX_TURNS,
    )


def test_a_crashing_runner_becomes_an_observation_and_zero() -> None:
    def broken(code: str, *, timeout_s: float, memory_mb: int) -> Canned:
        raise OSError("no sandbox")

    env = CodeRepairEnv(runner=broken)
    env.reset(TASK)
    result = env.step("<tool>test</tool>")
    assert result.observation == "<output>error: sandbox failed</output>"
    assert result.info["tool_error"] == "sandbox"
    final = env.step("<tool>submit</tool>")
    assert (final.reward, final.info["tool_error"]) == (0.0, "sandbox")


FRAGMENTS = ["<tool>", "</tool>", "view", "test", "submit", "replace ", "5", "-1", "\n", " ", "x"]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.sampled_from(FRAGMENTS), max_size=8), min_size=1, max_size=6))
def test_random_actions_never_crash_and_never_earn(actions: list[list[str]]) -> None:
    # The runner never prints the harness' status line, so no submission can pass.
    env = CodeRepairEnv(max_turns=len(actions), runner=lambda code, **kw: Canned(stdout="x"))
    env.reset(TASK)
    for pieces in actions:
        result = env.step("".join(pieces))
        assert result.reward == 0.0
        if result.done:
            break
    assert result.done


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        CodeRepairEnv(max_turns=0)
    with pytest.raises(ValueError, match="timeout_s"):
        CodeRepairEnv(timeout_s=0)
    with pytest.raises(ValueError, match="malformed_reward"):
        CodeRepairEnv(malformed_reward=0.5)
    with pytest.raises(ValueError, match="unsubmitted_reward"):
        CodeRepairEnv(unsubmitted_reward=-2)
    with pytest.raises(ValueError, match="needs"):
        CodeRepairEnv().reset(Task("t", "p", "a", {"source": "x"}))
    with pytest.raises(RuntimeError, match="reset"):
        CodeRepairEnv().step("<tool>view</tool>")


# ----------------------------------------------------------------------------- teacher
def test_teacher_is_imperfect_fast_and_regular() -> None:
    demos = demonstrations(400, seed=0)
    stats = summarize(demos)
    assert 0.55 <= stats.accuracy <= 0.85
    assert stats.accuracy_by_attempt["correct"] == 1.0
    assert stats.accuracy_by_attempt["wrong_line"] <= 0.05
    assert stats.max_chars < 1000
    for demo in demos:
        segments = demo.segments()
        assert segments[0] == (demo.task.prompt, False)
        assert [flag for _, flag in segments[1:]] == [True, False] * (len(demo.turns) - 1) + [True]
        assert segments[-1] == ("<tool>submit</tool>", True)
        assert segments[1][0].startswith("<tool>replace ")


def test_teacher_in_process_matches_the_sandbox() -> None:
    fast = demonstrations(4, seed=11)
    slow = demonstrations(4, seed=11, teacher=CodeRepairTeacher(env=CodeRepairEnv()))
    assert [d.text for d in fast] == [d.text for d in slow]
    assert [d.reward for d in fast] == [d.reward for d in slow]


def test_registry_builds_code_repair() -> None:
    env = make_env("code_repair", max_turns=5)
    assert isinstance(env, CodeRepairEnv) and env.max_turns == 5
    assert len(make_task_source("code_repair").test(2, seed=0)) == 2
    demos = make_demonstrations("code_repair", 3, seed=0)
    assert len(demos) == 3 and all(d[0][1] is False for d in demos)
