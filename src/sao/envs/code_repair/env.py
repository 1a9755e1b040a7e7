"""The `code_repair` environment: a tiny SWE-Bench with one seeded bug per file.

A trajectory reads like (tags are single tokens of the tiny default's tokenizer, several tokens
of a BPE one):

    Fix the bug. clamp(x, lo, hi) returns x limited to lo..hi.
    1 def clamp(x, lo, hi):
    ...
    5         return lo
    6     return x
    <tool>replace 5
            return hi</tool><output>ok</output><tool>test</tool><output>3/3 passed</output>
    <tool>submit</tool>

Commands (see `sao.envs.code_repair.protocol`): `view`, `replace N` + new lines, `test` (the
visible tests, in the sandbox, a short pass/fail summary back) and `submit` (the full suite --
visible and hidden tests -- in the sandbox; reward 1 iff every test passes, then done). Malformed
actions and failing tools become `<output>error: ...</output>` observations and cost a turn; they
never raise. Using `max_turns` actions without submitting ends the trajectory (end reason
`max_turns`) and, as SWE-Bench grades the repository an agent leaves whether it submitted or not,
grades the file as it stands then, the last action's edit applied: reward 1 iff the whole suite
passes (`grade_unsubmitted=False`: reward 0 without a submit).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from typing import Any

from sao.envs.base import END_ANSWER, END_MAX_TURNS, StepResult, Task
from sao.envs.code_repair.protocol import (
    COMMAND_ERRORS,
    Command,
    TestReport,
    apply_replace,
    build_harness,
    numbered,
    parse_command,
    read_report,
)
from sao.envs.text_protocol import wrap_output
from sao.envs.tool_runner import PythonRunner, describe_result, sandbox_runner
from sao.envs.turns import TurnLimitedEnvironment
from sao.formats.tags import TOOL_CLOSE

logger = logging.getLogger(__name__)

_META_KEYS = ("source", "entry", "visible_tests", "hidden_tests")


class CodeRepairEnv(TurnLimitedEnvironment):
    """Repair one small module with view / replace / test / submit tool commands.

    Args:
        max_turns: the most actions per trajectory (every command, malformed ones included).
        max_output_chars: longest text inside one `<output>`.
        max_lines: longest file an edit may produce.
        max_line_chars: longest line an edit may write.
        timeout_s: wall-clock limit for one test run.
        memory_mb: memory limit for one test run.
        runner: what runs the test harness; defaults to the project sandbox. Tests (and the
            teacher, for its own code only) pass something else.
        reuse_test_runs: `test` runs the hidden tests too, after the visible summary is out, and
            a `submit` of the file it tested takes that verdict instead of a second sandbox run
            (one run fewer in most episodes; the observations are unchanged). False runs the
            full suite afresh at every `submit`.
        grade_unsubmitted: an episode that runs out of turns is graded on the file it leaves
            (SWE-Bench's rule); False gives it reward 0, so only a `submit` can earn a reward.
        malformed_reward: the action reward (`StepResult.action_reward`) of every action that
            cannot be carried out as written (a command that does not parse, an edit the file
            refuses: `format_error` set), apart from the outcome: a wasted call costs the user
            of a coding agent, which the outcome alone does not say (`docs/environments.md`);
            0 gives none.
        unsubmitted_reward: the action reward of the last action of an episode that runs out
            of turns without a `submit`, apart from the graded outcome: an agent that hits its
            turn limit did not finish, and spent the user's whole budget on a change nobody
            tested (`docs/environments.md`); 0 gives none.
    """

    name = "code_repair"
    stop_tags: tuple[str, ...] = (TOOL_CLOSE,)

    def __init__(
        self,
        max_turns: int = 8,
        max_output_chars: int = 400,
        max_lines: int = 20,
        max_line_chars: int = 80,
        timeout_s: float = 2.0,
        memory_mb: int = 256,
        runner: PythonRunner | None = None,
        reuse_test_runs: bool = True,
        grade_unsubmitted: bool = True,
        malformed_reward: float = -0.1,
        unsubmitted_reward: float = 0.0,
    ) -> None:
        super().__init__(max_turns)
        for label, value, least in (
            ("max_output_chars", max_output_chars, 64),
            ("max_lines", max_lines, 2),
            ("max_line_chars", max_line_chars, 16),
            ("memory_mb", memory_mb, 48),
        ):
            if not isinstance(value, int) or value < least:
                raise ValueError(f"{label}: must be an int >= {least}, got {value!r}")
        if not isinstance(timeout_s, float | int) or not timeout_s > 0:
            raise ValueError(f"timeout_s: must be > 0, got {timeout_s!r}")
        for label, value in (
            ("malformed_reward", malformed_reward),
            ("unsubmitted_reward", unsubmitted_reward),
        ):
            if not isinstance(value, float | int) or not -1.0 <= value <= 0.0:
                raise ValueError(f"{label}: must be in [-1, 0], got {value!r}")
        self.max_output_chars = max_output_chars
        self.max_lines = max_lines
        self.max_line_chars = max_line_chars
        self.timeout_s = float(timeout_s)
        self.memory_mb = memory_mb
        self.runner: PythonRunner = runner if runner is not None else sandbox_runner
        self.reuse_test_runs = bool(reuse_test_runs)
        self.grade_unsubmitted = bool(grade_unsubmitted)
        self.malformed_reward = float(malformed_reward)
        self.unsubmitted_reward = float(unsubmitted_reward)
        self._lines: list[str] = []
        self._events: list[str] = []
        # The file a `test` ran the whole suite on, and whether the suite passed.
        self._suite_verdict: tuple[list[str], bool] | None = None

    @property
    def lines(self) -> list[str]:
        """The file as it stands now."""
        return list(self._lines)

    def start(self, task: Task) -> str:
        """Check that `task` carries its file and tests; returns its prompt."""
        missing = [key for key in _META_KEYS if key not in task.meta]
        if missing:
            raise ValueError(f"task.meta: a code_repair task needs {missing}")
        self._lines = task.meta["source"].removesuffix("\n").split("\n")
        self._events = []
        self._suite_verdict = None
        return task.prompt

    def take_turn(self, action_text: str) -> StepResult:
        """Apply one action; see the module docstring for the rules."""
        result = self._apply(action_text)
        action_reward = self.malformed_reward if result.info.get("format_error") else 0.0
        if result.info.get("end_reason") == END_MAX_TURNS:
            action_reward += self.unsubmitted_reward
        if action_reward:
            return dataclasses.replace(result, action_reward=action_reward)
        return result

    def _apply(self, action_text: str) -> StepResult:
        command = parse_command(action_text)
        info: dict[str, Any] = {
            "turn": self.turn,
            "command": command.kind,
            "tool_called": command.kind in ("view", "replace", "test"),
            "format_error": command.error,
            "tool_error": None,
            "end_reason": None,
        }
        self._events.append(command.kind)
        if command.kind == "submit":
            correct, tool_error = self._submitted_file_passes()
            info.update(end_reason=END_ANSWER, correct=correct, tool_error=tool_error)
            return self._finish(1.0 if correct else 0.0, info)
        if self.last_turn:
            return self._out_of_turns(command, info)
        if command.kind == "view":
            text = numbered(self._lines)
        elif command.kind == "replace":
            self._lines, error = apply_replace(
                self._lines, command.line, command.new_lines, self.max_lines, self.max_line_chars
            )
            info["format_error"] = error
            text = COMMAND_ERRORS[error] if error else "ok"
        elif command.kind == "test":
            report, tool_error = self._run_visible_tests()
            info["tool_error"] = tool_error
            text = report.summary if report is not None else tool_error_text(tool_error)
            passed = report is not None and report.all_passed
            self._events[-1] = "test_passed" if passed else "test_failed"
        else:
            assert command.error is not None
            text = COMMAND_ERRORS[command.error]
        return StepResult(wrap_output(text, self.max_output_chars), 0.0, False, info)

    def _out_of_turns(self, command: Command, info: dict[str, Any]) -> StepResult:
        """The end of an episode that used its last turn on anything but `submit`."""
        if not self.grade_unsubmitted:
            info.update(end_reason=END_MAX_TURNS, correct=False)
            return self._finish(0.0, info)
        if command.kind == "replace":
            self._lines, error = apply_replace(
                self._lines, command.line, command.new_lines, self.max_lines, self.max_line_chars
            )
            info["format_error"] = error
        correct, tool_error = self._submitted_file_passes()
        info.update(end_reason=END_MAX_TURNS, correct=correct, tool_error=tool_error)
        return self._finish(1.0 if correct else 0.0, info)

    def _finish(self, reward: float, info: dict[str, Any]) -> StepResult:
        # The whole episode's commands, for the run's behaviour metrics (`report.step_metrics`).
        info["events"] = list(self._events)
        return StepResult("", reward, True, info)

    def _run_visible_tests(self) -> tuple[TestReport | None, str | None]:
        """The visible tests' report (with the suite's verdict kept for a later `submit`)."""
        visible = self.task.meta["visible_tests"]
        if not self.reuse_test_runs:
            return self._run_tests(visible)
        report, tool_error = self._run_tests(
            visible + self.task.meta["hidden_tests"], shown=len(visible)
        )
        verdict = report.suite_all_passed if report is not None else None
        self._suite_verdict = None if verdict is None else (list(self._lines), verdict)
        return report, tool_error

    def _submitted_file_passes(self) -> tuple[bool, str | None]:
        """Whether the current file passes the whole suite, and the failure kind of its run."""
        if self._suite_verdict is not None and self._suite_verdict[0] == self._lines:
            return self._suite_verdict[1], None
        report, tool_error = self._run_tests(
            self.task.meta["visible_tests"] + self.task.meta["hidden_tests"]
        )
        return report is not None and report.all_passed, tool_error

    def _run_tests(
        self, tests: list, shown: int | None = None
    ) -> tuple[TestReport | None, str | None]:
        """Run `tests` on the current file in the runner (reporting the first `shown`); a
        report, or None and a failure kind."""
        nonce = secrets.token_hex(8)
        source = "\n".join(self._lines) + "\n"
        code = build_harness(source, self.task.meta["entry"], tests, nonce, shown)
        try:
            result = self.runner(code, timeout_s=self.timeout_s, memory_mb=self.memory_mb)
        except Exception:
            # A broken sandbox must not kill the rollout worker; the step info counts it.
            logger.exception("code_repair: the Python runner raised")
            return None, "sandbox"
        report = read_report(result.stdout, nonce)
        if report is not None:
            return report, None
        outcome = describe_result(result, self.timeout_s, self.max_output_chars)
        return None, outcome.tool_error or "unfinished"


_TOOL_ERROR_TEXT = {
    "timeout": "error: tests timed out",
    "sandbox": "error: sandbox failed",
    "exception": "error: tests crashed",
    "exit": "error: tests exited early",
    "unfinished": "error: tests did not finish",
}


def tool_error_text(kind: str | None) -> str:
    """The observation for a test run that produced no report."""
    return _TOOL_ERROR_TEXT.get(kind or "unfinished", "error: tests did not finish")
