"""`RunStopped`: a run that stops itself on purpose, for a reason its own line states.

Apart from `sao.config.ConfigError` (input refused before any work, exit 2), so the command line
can print the reason as its one line and exit 1 without importing the runtime.
"""

from __future__ import annotations


class RunStopped(RuntimeError):
    """A running command stopped itself; the message is the one line the command prints."""
