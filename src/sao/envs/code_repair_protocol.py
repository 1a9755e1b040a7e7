"""Pure text rules of `code_repair`: the tool commands, file edits and the test harness.

The policy acts with one command inside tool tags:

    <tool>view</tool>                    the file with line numbers
    <tool>replace 3\\n    return a</tool>  line 3 becomes the lines after the first newline
    <tool>test</tool>                    run the visible tests
    <tool>submit</tool>                  run the full suite and end the episode

Nothing here runs code or keeps state: the environment (`sao.envs.code_repair`) is the plumbing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sao.tags import TOOL_CLOSE, TOOL_OPEN

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


def _main():
    namespace = {"__name__": "f"}
    sink = _io.StringIO()
    try:
        with _cl.redirect_stdout(sink):
            exec(compile(_SRC, "f.py", "exec"), namespace)
    except SyntaxError as err:
        return 0, "error: %s on line %s" % (type(err).__name__, err.lineno)
    except Exception as err:
        return 0, "error: %s while loading" % type(err).__name__
    function = namespace.get(_ENTRY)
    if not callable(function):
        return 0, "error: no function " + _ENTRY
    passed, first = 0, ""
    for args, want in _TESTS:
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
    return passed, "%d/%d passed%s" % (passed, len(_TESTS), first)


_passed, _summary = _main()
print(_NONCE, _passed, len(_TESTS))
print(_summary)
"""


def build_harness(source: str, entry: str, tests: Sequence[Sequence[Any]], nonce: str) -> str:
    """A script that loads `source` as a module and runs `tests` (`[args, expected]` pairs).

    It prints `NONCE PASSED TOTAL` and then a one- or two-line summary. The module's own prints
    are swallowed, so they cannot fake the first line; code that inspects its caller could, which
    is why this guards against accidents, not against a determined adversary.
    """
    if not re.fullmatch(r"[A-Za-z_]\w*", entry):
        raise ValueError(f"entry: not a function name: {entry!r}")
    if not re.fullmatch(r"\w+", nonce):
        raise ValueError(f"nonce: must be a word, got {nonce!r}")
    pairs = [[list(args), expected] for args, expected in tests]
    preamble = f"_SRC = {source!r}\n_TESTS = {pairs!r}\n_ENTRY = {entry!r}\n_NONCE = {nonce!r}\n"
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
    """What the harness printed: tests passed, tests run, and the summary lines."""

    passed: int
    total: int
    summary: str

    @property
    def all_passed(self) -> bool:
        """Whether every test passed (and there was at least one)."""
        return self.total > 0 and self.passed == self.total


def read_report(stdout: str, nonce: str) -> TestReport | None:
    """Parse the harness output; None when its status line is missing (it did not finish)."""
    lines = stdout.splitlines()
    for index, line in enumerate(lines):
        parts = line.split()
        if len(parts) == 3 and parts[0] == nonce and parts[1].isdigit() and parts[2].isdigit():
            summary = "\n".join(lines[index + 1 :]).strip()
            return TestReport(int(parts[1]), int(parts[2]), summary)
    return None
