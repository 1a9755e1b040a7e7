"""`sao train` before any work: which run directory, which config, and can it all work.

A new run refuses a directory that already holds any run file; `--resume` takes the run's saved
`config.yaml` and refuses flags that would change what the run is. Every output location and the
Ray address are checked here, before the warm start, value pretraining or anything else costly.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

import yaml

from sao.config import ConfigError, SAOConfig, load_run_config
from sao.plumbing.durable import atomic_write_text, strict_dumps
from sao.preflight import check_learner_ranks
from sao.runtime.run_dir import check_writable, existing_run_files

RAY_CONNECT_TIMEOUT_S = 5.0


@dataclass
class FixedFlags:
    """Flags that choose what a run is; a resumed run keeps its own and refuses others."""

    preset: str | None = None
    env: str | None = None
    config_path: str | None = None
    out: str | None = None


def run_train_command(
    config: SAOConfig | None,
    resume: str | None = None,
    overrides: list[str] | None = None,
    fixed: FixedFlags | None = None,
) -> int:
    """Entry point of `sao train`.

    With `resume`, the run's saved `config.yaml` is loaded and `overrides` (e.g. a larger
    `train.steps`) are applied over it; `config` is then ignored and `fixed` must agree with the
    saved run.
    """
    if resume:
        run_dir = Path(resume)
        config = resumed_config(run_dir, overrides or [], fixed or FixedFlags())
    else:
        if config is None:
            raise ValueError("run_train_command: a config is needed unless resuming")
        run_dir = config.run_dir()
        found = existing_run_files(run_dir)
        if found:
            raise ConfigError(
                f"{run_dir} already holds a run ({', '.join(found)}); "
                f"continue it with --resume {run_dir}, or choose another --out"
            )
    preflight(config, run_dir)
    write_config(config, run_dir / "config.yaml")
    from sao.runtime.train import train

    summary = train(config, run_dir, resume=bool(resume))
    print(strict_dumps(summary, indent=2))
    from sao.runtime.report import closing_line, env_error_line

    for line in (env_error_line(summary), closing_line(summary)):
        if line is not None:
            print(line)
    return 0


def resumed_config(run_dir: Path, overrides: list[str], fixed: FixedFlags) -> SAOConfig:
    """The run's own config with `overrides` applied; fails with one line on anything that would
    change the run's preset, environment or directory, or a `--config` file."""
    saved_path = run_dir / "config.yaml"
    if not saved_path.is_file():
        raise ConfigError(f"--resume {run_dir}: no run there (no config.yaml)")
    saved = yaml.safe_load(saved_path.read_text()) or {}
    saved_preset = saved.get("preset", "sao")
    saved_env = (saved.get("env") or {}).get("name", "calc")
    if fixed.config_path:
        raise ConfigError(
            f"--resume {run_dir} cannot apply --config {fixed.config_path}: "
            "the run keeps its config.yaml; give changes as --set KEY=VALUE"
        )
    # The run directory is the one being resumed, whatever a `train.out` override says.
    overrides = [o for o in overrides if not o.startswith("train.out=")]
    config = load_run_config(run_dir, overrides)
    for flag, given, kept, now in (
        ("--preset", fixed.preset, saved_preset, config.preset),
        ("--env", fixed.env, saved_env, config.env.name),
    ):
        if (given is not None and given != kept) or now != kept:
            raise ConfigError(
                f"--resume {run_dir} runs {flag.lstrip('-')} {kept!r}; "
                f"{flag} {given or now!r} would change it (start a new run with --out NEW_DIR)"
            )
    if fixed.out is not None and Path(fixed.out).resolve() != run_dir.resolve():
        raise ConfigError(
            f"--resume {run_dir} writes into {run_dir}; --out {fixed.out} differs "
            "(leave --out out when resuming)"
        )
    return config.model_copy(
        update={"train": config.train.model_copy(update={"out": str(run_dir)})}
    )


def preflight(config: SAOConfig, run_dir: Path) -> None:
    """Fail now, with one line, on anything that would fail only after costly work."""
    if config.model.path and not Path(config.model.path).exists():
        raise ConfigError(f"model.path {config.model.path} does not exist")
    check_learner_ranks(config)
    check_writable(run_dir, "run directory")
    if not config.model.path and not (config.warm_start_dir() / "config.json").exists():
        check_writable(config.warm_start_dir().parent, "warm-start directory")
    if config.train.backend == "ray" and config.train.ray_address:
        check_ray_address(config.train.ray_address)


def check_ray_address(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Connect to `HOST:PORT` (or `ray://HOST:PORT`) within `timeout_s`, else stop with one line;
    `auto` and `local` are Ray's own lookups and pass through."""
    if address in ("auto", "local"):
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"--ray-address {address!r}: expected HOST:PORT")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s).close()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ConfigError(
            f"nothing answers at Ray address {address} ({reason}, "
            f"{timeout_s:.0f}s timeout); start a cluster with `ray start --head` or drop "
            "--ray-address"
        ) from None


def write_config(config: SAOConfig, path: Path) -> None:
    """The resolved config as YAML, written atomically."""
    data = json.loads(strict_dumps(config.model_dump(mode="json")))
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))
