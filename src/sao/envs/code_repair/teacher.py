"""A scripted, deliberately imperfect teacher for `code_repair`, whose demonstrations seed SFT.

Every demonstration follows one regular shape (the prompt already shows the file):

    <tool>replace N\\nFIX</tool><output>ok</output>
    <tool>test</tool><output>K/M passed...</output>
    [after a failed wrong fix, sometimes: replace the same spot correctly, test again]
    <tool>submit</tool>

Imperfection knobs, so a student that imitates the teacher is often wrong and RL has room:

- `p_wrong_fix`: the right line gets a plausible but wrong edit (another seeded-bug edit of the
  correct text).
- `p_wrong_line`: a neighbouring line gets "fixed" instead, which adds a second bug.
- `p_skip_test`: submit straight after the edit, without testing.
- `p_retry`: after a wrong fix that the tests expose, fix it properly and test again.

Observations come from `CodeRepairEnv.step`, so they are exactly what the policy sees in RL. By
default the environment's runner is `TrustedHarnessRunner`: it runs the harness in process, and
only for module sources the teacher itself wrote (templates and seeded edits, never model text),
which makes tens of thousands of demonstrations cheap. The environment used in RL always runs the
sandbox.
"""

from __future__ import annotations

import contextlib
import io
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from sao.envs.base import Task
from sao.envs.code_repair.bugs import LINE_FAMILIES, line_mutations, variables_of
from sao.envs.code_repair.env import CodeRepairEnv
from sao.envs.code_repair.protocol import HARNESS_BODY, apply_replace, split_harness
from sao.envs.code_repair.tasks import CodeRepairTaskSource
from sao.envs.demonstration import TeacherTrajectory, Turn, probability
from sao.formats.tags import TOOL_CLOSE, TOOL_OPEN

ATTEMPTS = ("correct", "wrong_fix", "wrong_line")


@dataclass(frozen=True)
class InProcessResult:
    """A finished in-process run, shaped like `sao.tools.sandbox.SandboxResult`."""

    stdout: str
    stderr: str = ""
    exit_code: int | None = 0
    timed_out: bool = False
    error: str | None = None


class TrustedHarnessRunner:
    """Runs a test harness in process, but only around module sources marked as trusted.

    The teacher calls `trust(source)` for each file state it is about to test; anything else --
    in particular anything a model wrote -- raises `ValueError` instead of running.
    """

    def __init__(self) -> None:
        self._trusted: set[str] = set()
        self._body = compile(HARNESS_BODY, "harness.py", "exec")

    def trust(self, source: str) -> None:
        """Allow the harness around `source` to run in process."""
        self._trusted.add(source)

    def forget(self) -> None:
        """Drop every trusted source (between tasks)."""
        self._trusted.clear()

    def __call__(self, code: str, *, timeout_s: float, memory_mb: int) -> InProcessResult:
        """Run `code` (a harness built by `build_harness`) if its module is trusted."""
        parts = split_harness(code)
        if parts is None or parts[0] not in self._trusted:
            raise ValueError("code: the in-process runner only runs the teacher's own modules")
        namespace = {"__name__": "__main__"}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(parts[1], namespace)
            exec(self._body, namespace)
        return InProcessResult(stdout=out.getvalue())


@dataclass(frozen=True)
class Demonstration(TeacherTrajectory):
    """A full teacher trajectory for one task.

    Attributes:
        task: the task.
        turns: the actions and observations, in order; the last action is `submit`.
        reward: the environment's reward at submit.
        attempt: the first edit's kind, one of `ATTEMPTS`.
        retried: whether the teacher fixed its first edit after the tests failed.
    """

    attempt: str
    retried: bool


def _mutant(line: str, variables: Sequence[str], avoid: Sequence[str], rng: random.Random) -> str:
    """A seeded-bug edit of `line` other than `avoid`; `line` itself when there is none."""
    options = [
        m
        for family in LINE_FAMILIES
        for m in line_mutations(line, family, variables)
        if m not in avoid
    ]
    return rng.choice(options) if options else line


def replace_action(line: int, new_lines: Sequence[str]) -> str:
    """The tool action replacing line `line` with `new_lines`."""
    return f"{TOOL_OPEN}replace {line}\n" + "\n".join(new_lines) + TOOL_CLOSE


class CodeRepairTeacher:
    """Writes `code_repair` demonstrations with controlled mistakes.

    Args:
        p_wrong_fix: probability the first edit is a wrong fix of the right line.
        p_wrong_line: probability the first edit changes a wrong line.
        p_skip_test: probability of submitting without testing.
        p_retry: probability of repairing a wrong fix after the tests failed.
        env: the environment that produces observations; by default a `CodeRepairEnv` whose
            runner is a `TrustedHarnessRunner`.
    """

    def __init__(
        self,
        p_wrong_fix: float = 0.3,
        p_wrong_line: float = 0.15,
        p_skip_test: float = 0.1,
        p_retry: float = 0.5,
        env: CodeRepairEnv | None = None,
    ) -> None:
        self.p_wrong_fix = probability("p_wrong_fix", p_wrong_fix)
        self.p_wrong_line = probability("p_wrong_line", p_wrong_line)
        if self.p_wrong_fix + self.p_wrong_line > 1.0:
            raise ValueError("p_wrong_fix + p_wrong_line: must be at most 1")
        self.p_skip_test = probability("p_skip_test", p_skip_test)
        self.p_retry = probability("p_retry", p_retry)
        self.env = env if env is not None else CodeRepairEnv(runner=TrustedHarnessRunner())

    def _plan_first_edit(
        self, task: Task, lines: list[str], rng: random.Random
    ) -> tuple[str, int, list[str], int]:
        """`(attempt kind, line number, new lines, index of the wrong line in new lines)`."""
        bug_line, fix = task.meta["bug_line"], list(task.meta["fix"])
        variables = variables_of(lines)
        draw = rng.random()
        if draw < self.p_wrong_fix:
            slot = rng.randrange(len(fix))
            avoid = [fix[slot], *lines[bug_line - 1 : bug_line - 1 + len(fix)]]
            wrong = _mutant(fix[slot], variables, avoid, rng)
            if wrong != fix[slot]:
                return "wrong_fix", bug_line, [*fix[:slot], wrong, *fix[slot + 1 :]], slot
        elif draw < self.p_wrong_fix + self.p_wrong_line:
            others = [
                i + 1
                for i, text in enumerate(lines)
                if i + 1 != bug_line and text.strip() and not text.startswith("def ")
            ]
            if others:
                target = rng.choice(others)
                wrong = _mutant(lines[target - 1], variables, [lines[target - 1]], rng)
                if wrong != lines[target - 1]:
                    return "wrong_line", target, [wrong], 0
        return "correct", bug_line, fix, 0

    def _edit(
        self, lines: list[str], line: int, new_lines: list[str], turns: list[Turn]
    ) -> list[str]:
        """Send a replace action (trusting the file it produces); returns the new file."""
        edited, _ = apply_replace(
            lines, line, new_lines, self.env.max_lines, self.env.max_line_chars
        )
        self._trust(edited)
        action = replace_action(line, new_lines)
        turns.append(Turn(action, self.env.step(action).observation))
        return edited

    def _trust(self, lines: Sequence[str]) -> None:
        if isinstance(self.env.runner, TrustedHarnessRunner):
            self.env.runner.trust("\n".join(lines) + "\n")

    def demonstrate(self, task: Task, rng: random.Random) -> Demonstration:
        """Play `task` through the environment and return the trajectory."""
        if isinstance(self.env.runner, TrustedHarnessRunner):
            self.env.runner.forget()
        self.env.reset(task)
        lines = self.env.lines
        turns: list[Turn] = []
        attempt, line, new_lines, slot = self._plan_first_edit(task, lines, rng)
        lines = self._edit(lines, line, new_lines, turns)
        retried = False
        if rng.random() >= self.p_skip_test:
            result = self.env.step(f"{TOOL_OPEN}test{TOOL_CLOSE}")
            turns.append(Turn(f"{TOOL_OPEN}test{TOOL_CLOSE}", result.observation))
            if (
                attempt == "wrong_fix"
                and not _all_passed(result.observation)
                and rng.random() < self.p_retry
            ):
                # The prompt already shows the file, and the edit is in the context: fix the
                # same spot again straight away, so a retry fits a 5-turn budget.
                retried = True
                fix = task.meta["fix"]
                lines = self._edit(lines, line + slot, [fix[slot]], turns)
                again = self.env.step(f"{TOOL_OPEN}test{TOOL_CLOSE}")
                turns.append(Turn(f"{TOOL_OPEN}test{TOOL_CLOSE}", again.observation))
        final = self.env.step(f"{TOOL_OPEN}submit{TOOL_CLOSE}")
        turns.append(Turn(f"{TOOL_OPEN}submit{TOOL_CLOSE}", final.observation))
        return Demonstration(task, tuple(turns), final.reward, attempt, retried)


def _all_passed(observation: str) -> bool:
    """Whether a test observation says every test passed (`<output>3/3 passed</output>`)."""
    head = observation.split("passed", 1)[0].rsplit(">", 1)[-1].strip()
    done, _, total = head.partition("/")
    return done.isdigit() and done == total


@dataclass(frozen=True)
class DemoStats:
    """Summary of a set of demonstrations.

    Attributes:
        count: number of demonstrations.
        accuracy: mean reward.
        accuracy_by_attempt: mean reward per first-edit kind.
        share_by_attempt: share of each first-edit kind.
        retry_rate: share of demonstrations with a retry.
        mean_chars / max_chars: length of `Demonstration.text` in characters.
    """

    count: int
    accuracy: float
    accuracy_by_attempt: dict[str, float] = field(default_factory=dict)
    share_by_attempt: dict[str, float] = field(default_factory=dict)
    retry_rate: float = 0.0
    mean_chars: float = 0.0
    max_chars: int = 0


def summarize(demos: Sequence[Demonstration]) -> DemoStats:
    """Accuracy, mistake mix and length of `demos`."""
    if not demos:
        raise ValueError("demos: empty")
    by_attempt: dict[str, list[float]] = {}
    for demo in demos:
        by_attempt.setdefault(demo.attempt, []).append(demo.reward)
    lengths = [len(demo.text) for demo in demos]
    return DemoStats(
        count=len(demos),
        accuracy=sum(d.reward for d in demos) / len(demos),
        accuracy_by_attempt={k: sum(v) / len(v) for k, v in sorted(by_attempt.items())},
        share_by_attempt={k: len(v) / len(demos) for k, v in sorted(by_attempt.items())},
        retry_rate=sum(d.retried for d in demos) / len(demos),
        mean_chars=sum(lengths) / len(lengths),
        max_chars=max(lengths),
    )


def demonstrations(
    n: int,
    seed: int,
    *,
    split: str = "train",
    teacher: CodeRepairTeacher | None = None,
    source: CodeRepairTaskSource | None = None,
) -> list[Demonstration]:
    """`n` teacher demonstrations on `code_repair` tasks of `split`, deterministic in `seed`."""
    if split not in ("train", "test"):
        raise ValueError(f"split: must be 'train' or 'test', got {split!r}")
    source = source if source is not None else CodeRepairTaskSource()
    tasks = source.train(n, seed) if split == "train" else source.test(n, seed)
    teacher = teacher if teacher is not None else CodeRepairTeacher()
    rng = random.Random(seed * 7919 + 23)
    return [teacher.demonstrate(task, rng) for task in tasks]
