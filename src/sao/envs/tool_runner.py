"""How an environment runs Python and turns the result into a short observation.

Code runs only through the sandbox (`sao.tools.sandbox.run_python`). Environments take the runner
as a constructor argument so tests can inject a fake; the default imports the sandbox lazily, at
the first call, so importing an environment never requires the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sao.envs.text_protocol import wrap_output


class SandboxResultLike(Protocol):
    """The fields of `sao.tools.sandbox.SandboxResult` an environment reads."""

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    error: str | None


class PythonRunner(Protocol):
    """Anything called like `run_python(code, timeout_s=..., memory_mb=...)`."""

    def __call__(self, code: str, *, timeout_s: float, memory_mb: int) -> SandboxResultLike:
        """Run `code` and return what happened."""
        ...


def sandbox_runner(code: str, *, timeout_s: float, memory_mb: int) -> SandboxResultLike:
    """Run `code` in the project sandbox (imported on first use)."""
    from sao.tools.sandbox import run_python

    return run_python(code, timeout_s=timeout_s, memory_mb=memory_mb)


@dataclass(frozen=True)
class ToolOutcome:
    """The observation for one tool call and, if the call failed, a short failure kind.

    Attributes:
        observation: `<output>...</output>` text to append after the action.
        tool_error: None on success, else `"timeout"`, `"sandbox"`, `"exception"` or `"exit"`.
    """

    observation: str
    tool_error: str | None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def describe_result(result: SandboxResultLike, timeout_s: float, max_chars: int) -> ToolOutcome:
    """Turn a sandbox result into a short observation.

    A failure shows one line (`error: SyntaxError: invalid syntax`), not a traceback: the last
    line of a Python traceback names the exception, which is all a tiny policy can use.
    """
    if result.timed_out:
        return ToolOutcome(
            wrap_output(f"error: timeout after {timeout_s:g}s", max_chars), "timeout"
        )
    if result.error:
        return ToolOutcome(wrap_output(f"error: {_last_line(result.error)}", max_chars), "sandbox")
    if result.exit_code != 0:
        reason = _last_line(result.stderr) or f"exit code {result.exit_code}"
        kind = "exception" if _last_line(result.stderr) else "exit"
        return ToolOutcome(wrap_output(f"error: {reason}", max_chars), kind)
    stdout = result.stdout.strip()
    return ToolOutcome(wrap_output(stdout if stdout else "(no output)", max_chars), None)
