"""Tools that model-written actions may call; model code runs only inside `run_python`."""

from sao.tools.sandbox import (
    SandboxResult,
    max_concurrency,
    run_python,
    sandbox_capabilities,
    sandbox_uids,
    set_max_concurrency,
)

__all__ = [
    "SandboxResult",
    "max_concurrency",
    "run_python",
    "sandbox_capabilities",
    "sandbox_uids",
    "set_max_concurrency",
]
