"""Fallback network block: run a script under an audit hook that refuses sockets.

Used only where the kernel refuses a network namespace. Run as
`python -I network_guard.py CODE_PATH`; standard library only, like the launcher.

An audit hook cannot be removed from Python code, but native code could bypass it, so the hook
also refuses loading native libraries through ctypes and starting other programs (which would
have their own, unhooked, sockets). This is weaker than a namespace, hence "fallback".
"""

from __future__ import annotations

import sys

BLOCKED_EVENT_PREFIXES = (
    "socket.",
    "ctypes.dlopen",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.system",
    "subprocess.Popen",
    "pty.spawn",
)


def _refuse_network(event: str, args: tuple) -> None:
    if event.startswith(BLOCKED_EVENT_PREFIXES):
        raise PermissionError(f"sandbox: {event} is blocked (no network)")


def main() -> None:
    """Install the hook, then run the code file as `__main__` with a clean traceback."""
    code_path = sys.argv[1]
    with open(code_path, encoding="utf-8") as handle:
        source = handle.read()
    sys.argv = [code_path]
    sys.addaudithook(_refuse_network)
    namespace = {"__name__": "__main__", "__file__": code_path, "__builtins__": __builtins__}
    try:
        exec(compile(source, code_path, "exec"), namespace)
    except SystemExit:
        raise
    except BaseException as exc:
        # Drop this file's own frame so the traceback reads as if the code ran directly.
        sys.excepthook(type(exc), exc, exc.__traceback__.tb_next)
        sys.exit(1)


if __name__ == "__main__":
    main()
