"""Import a file of the repository's `scripts/` folder as a module, for the tests of its
functions (the scripts are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str) -> ModuleType:
    """`scripts/<name>.py` as a module named `name`."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: dataclasses look their module up while the class is made.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
