"""Pure text rules of `code_repair`: the tool commands, file edits and the test harness.

The policy acts with one command inside tool tags:

    <tool>view</tool>                    the file with line numbers
    <tool>replace 3\\n    return a</tool>  line 3 becomes the lines after the first newline
    <tool>test</tool>                    run the visible tests
    <tool>submit</tool>                  run the full suite and end the episode

Nothing here runs code or keeps state: the environment (`sao.envs.code_repair.env`) is the plumbing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sao.formats.tags import TOOL_CLOSE, TOOL_OPEN

COMMANDS = ("view", "replace", "test", "submit")

# Messages name tags by word, never by tag token, so the policy cannot mistake them for its own.
COMMAND_ERRORS: dict[str, str] = {
    "no_tag": "error: no tool tag",
    "unclosed_tool": "error: tool tag not closed",
    "unknown_command": "error: use view, replace N, test or submit",
    "bad_line_number": "error: replace needs a line number",
    "line_out_of_range": "error: no such line",
    "empty_replacement": "error: replace needs new text",
    "file_too_long": "error: file too long",
    "line_too_long": "error: line too long",
}

_REPLACE = re.compile(r"replace\s+(\d+)")


@dataclass(frozen=True)
class Command:
    """One parsed action.

    Attributes:
        kind: a command of `COMMANDS`, or `"error"`.
        line: the 1-based line number of a `replace`.
        new_lines: the replacement lines of a `replace`.
        error: the error kind (a key of `COMMAND_ERRORS`) when `kind == "error"`.
    """

    kind: Literal["view", "replace", "test", "submit", "error"]
    line: int = 0
    new_lines: tuple[str, ...] = ()
    error: str | None = None


def parse_command(action_text: str) -> Command:
    """Classify one action; text outside the first tool tag pair is ignored.

    Raises:
        TypeError: if `action_text` is not a string.
    """
    if not isinstance(action_text, str):
        raise TypeError(f"action_text: expected str, got {type(action_text)}")
    if TOOL_OPEN not in action_text:
        return Command("error", error="no_tag")
    start = action_text.index(TOOL_OPEN) + len(TOOL_OPEN)
    end = action_text.find(TOOL_CLOSE, start)
    if end < 0:
        return Command("error", error="unclosed_tool")
    head, _, body = action_text[start:end].partition("\n")
    head = head.strip()
    if head in ("view", "test", "submit"):
        return Command(head)  # type: ignore[arg-type]
    if not head.startswith("replace"):
        return Command("error", error="unknown_command")
    match = _REPLACE.fullmatch(head)
    if match is None:
        return Command("error", error="bad_line_number")
    new_lines = tuple(body.removesuffix("\n").split("\n"))
    if not body.strip():
        return Command("error", error="empty_replacement")
    return Command("replace", line=int(match.group(1)), new_lines=new_lines)


def numbered(lines: Sequence[str]) -> str:
    """The file as the policy sees it: `N code` per line, numbered from 1."""
    return "\n".join(f"{i} {line}".rstrip() for i, line in enumerate(lines, start=1))


def apply_replace(
    lines: Sequence[str], line: int, new_lines: Sequence[str], max_lines: int, max_line_chars: int
) -> tuple[list[str], str | None]:
    """Replace line `line` (1-based) by `new_lines`; returns `(new file, error kind or None)`.

    On an error the file comes back unchanged.
    """
    if not 1 <= line <= len(lines):
        return list(lines), "line_out_of_range"
    if any(len(text) > max_line_chars for text in new_lines):
        return list(lines), "line_too_long"
    edited = [*lines[: line - 1], *new_lines, *lines[line:]]
    if len(edited) > max_lines:
        return list(lines), "file_too_long"
    return edited, None


# The harness is a data preamble (`_SRC`, `_TESTS`, `_ENTRY`, `_NONCE`) followed by this fixed
# body, so an in-process runner can compile the body once and reuse it.
HARNESS_BODY = r"""
import contextlib as _cl
import io as _io


def _show(value):
    text = repr(value) if type(value) in (int, bool, type(None)) else type(value).__name__
    return text if len(text) <= 20 else text[:17] + "..."


def _load(sink):
    namespace = {"__name__": "f"}
    try:
        with _cl.redirect_stdout(sink):
            exec(compile(_SRC, "f.py", "exec"), namespace)
    except SyntaxError as err:
        return None, "error: %s on line %s" % (type(err).__name__, err.lineno)
    except Exception as err:
        return None, "error: %s while loading" % type(err).__name__
    function = namespace.get(_ENTRY)
    if not callable(function):
        return None, "error: no function " + _ENTRY
    return function, ""


def _run(function, tests, sink):
    passed, first = 0, ""
    for args, want in tests:
        call = "%s(%s)" % (_ENTRY, ", ".join(repr(a) for a in args))
        try:
            with _cl.redirect_stdout(sink):
                got = function(*args)
            ok = type(got) is type(want) and got == want
            shown = "gave " + _show(got)
        except Exception as err:
            ok, shown = False, "raised " + type(err).__name__
        passed += ok
        if not ok and not first:
            first = "\n%s %s, want %r" % (call, shown, want)
    return passed, first


def _main():
    sink = _io.StringIO()
    function, error = _load(sink)
    shown = _TESTS[:_SHOWN]
    passed, first = (0, "") if function is None else _run(function, shown, sink)
    print(_NONCE, passed, len(shown))
    # Flushed: a later hang in the rest of the suite must not lose the shown tests' report.
    print(error or "%d/%d passed%s" % (passed, len(shown), first), flush=True)
    if len(shown) < len(_TESTS):
        rest = 0 if function is None else _run(function, _TESTS[_SHOWN:], sink)[0]
        print(_NONCE, "suite", passed + rest, len(_TESTS))


_main()
"""


def build_harness(
    source: str,
    entry: str,
    tests: Sequence[Sequence[Any]],
    nonce: str,
    shown: int | None = None,
) -> str:
    """A script that loads `source` as a module and runs `tests` (`[args, expected]` pairs).

    It runs the first `shown` tests (all by default) and prints `NONCE PASSED SHOWN` and then a
    one- or two-line summary of them. When `shown` leaves tests over, it then runs those too and
    prints `NONCE suite PASSED TOTAL` for the whole list: one run serves both a `test` command and
    a later `submit` of the same file. The module's own prints are swallowed, so they cannot fake
    a status line; code that inspects its caller could, which is why this guards against
    accidents, not against a determined adversary.
    """
    if not re.fullmatch(r"[A-Za-z_]\w*", entry):
        raise ValueError(f"entry: not a function name: {entry!r}")
    if not re.fullmatch(r"\w+", nonce):
        raise ValueError(f"nonce: must be a word, got {nonce!r}")
    shown = len(tests) if shown is None else shown
    if not 0 <= shown <= len(tests):
        raise ValueError(f"shown: must be in 0..{len(tests)}, got {shown}")
    pairs = [[list(args), expected] for args, expected in tests]
    preamble = (
        f"_SRC = {source!r}\n_TESTS = {pairs!r}\n_SHOWN = {shown}\n_ENTRY = {entry!r}\n"
        f"_NONCE = {nonce!r}\n"
    )
    return preamble + HARNESS_BODY


def split_harness(code: str) -> tuple[str, str] | None:
    """`(module source, data preamble)` of a script made by `build_harness`; None otherwise."""
    preamble, body = code[: -len(HARNESS_BODY)], code[-len(HARNESS_BODY) :]
    if body != HARNESS_BODY or not preamble.startswith("_SRC = "):
        return None
    try:
        source = ast.literal_eval(preamble.partition("\n")[0][len("_SRC = ") :])
    except (ValueError, SyntaxError):
        return None
    return (source, preamble) if isinstance(source, str) else None


@dataclass(frozen=True)
class TestReport:
    """What the harness printed: the shown tests' passes, count and summary lines, and, when the
    harness ran more tests than it showed and finished them, the whole suite's passes and count.
    """

    passed: int
    total: int
    summary: str
    suite_passed: int | None = None
    suite_total: int | None = None

    @property
    def all_passed(self) -> bool:
        """Whether every shown test passed (and there was at least one)."""
        return self.total > 0 and self.passed == self.total

    @property
    def suite_all_passed(self) -> bool | None:
        """Whether the whole suite passed; None when the harness did not report it."""
        if self.suite_total is None or self.suite_passed is None:
            return None
        return self.suite_total > 0 and self.suite_passed == self.suite_total


def read_report(stdout: str, nonce: str) -> TestReport | None:
    """Parse the harness output; None when its status line is missing (it did not finish)."""
    lines = stdout.splitlines()
    status = [index for index, line in enumerate(lines) if _counts(line, nonce, 2) is not None]
    if not status:
        return None
    first = status[0]
    suite = [i for i in range(first + 1, len(lines)) if _counts(lines[i], nonce, 3) is not None]
    end = suite[0] if suite else len(lines)
    passed, total = _counts(lines[first], nonce, 2)
    summary = "\n".join(lines[first + 1 : end]).strip()
    suite_counts = _counts(lines[end], nonce, 3) if suite else (None, None)
    return TestReport(passed, total, summary, *suite_counts)


def _counts(line: str, nonce: str, fields: int) -> tuple[int, int] | None:
    """`(passed, total)` of a status line: `NONCE P T` (fields=2) or `NONCE suite P T` (3)."""
    parts = line.split()
    prefix = [nonce] if fields == 2 else [nonce, "suite"]
    if len(parts) != fields + 1 or parts[: len(prefix)] != prefix:
        return None
    numbers = parts[len(prefix) :]
    if not all(number.isdigit() for number in numbers):
        return None
    return int(numbers[0]), int(numbers[1])
