"""The Python sandbox: `run_python` runs model-written code in an isolated child process.

`run` builds and supervises one run; `launcher` (standalone, started as a script) sets up the
isolation layers; `limits`, `outcome`, `pipes` and `cleanup` are its pure parts and helpers;
`workdirs` owns the per-run temporary directories. See docs/sandbox.md.
"""

from sao.tools.sandbox.run import (
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
