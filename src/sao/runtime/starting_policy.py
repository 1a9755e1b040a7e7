"""The checkpoint a run starts from: `model.path`, else the environment's warm start.

`sao train` prepares it as its run starts (on the run's clock), `sao reproduce` once before a
study's runs; a missing warm start is trained (`sao sft`) first, and the training loop only loads
what this returns.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sao.config import ConfigError, SAOConfig
from sao.warmstart.record import stale_warning
from sao.warmstart.sft import warm_start


def starting_policy(config: SAOConfig, progress: bool = True) -> Path:
    """The policy to start from: `model.path`, else the warm start (trained now if missing).
    One whose record (`sao.warmstart.record`) no longer fits the environment is used with a
    warning that names the command rebuilding it."""
    if config.model.path:
        path = Path(config.model.path)
        if not path.exists():
            raise ConfigError(f"model.path {path} does not exist")
    else:
        path = config.warm_start_dir()
        if not (path / "config.json").exists():
            print(f"sao train: no warm-start policy at {path}; training one (`sao sft`) first")
            warm_start(
                config.env.name,
                path,
                config.sft,
                seed=config.train.seed,
                model_path=config.model.warm_start_from,
                progress=progress,
                env_options=config.env.options,
            )
            return path
    warning = stale_warning(path, config.env.name, "sao train")
    if warning:
        print(warning, file=sys.stderr)
    return path
