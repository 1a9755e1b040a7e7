"""The runs of a study: one per (arm, seed), each in `OUT/<arm>/seed<k>/`, resumable.

A run whose `summary.json` exists is finished and skipped; a run directory with a `config.yaml`
but no summary was interrupted and is resumed under its own saved config (as `sao train
--resume`); anything else starts fresh. Arms shared by several claims run once per seed. Every
arm of an environment starts from the same warm start, built once (seed 0) before its runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tqdm import tqdm

from sao.config import SAOConfig, load_config
from sao.reproduce.budgets import Budget
from sao.reproduce.claims import Arm, Claim

RunState = Literal["finished", "interrupted", "new"]
RunFunction = Callable[[SAOConfig, Path, bool], None]
"""Trains `config` into the run directory; the flag says whether to resume it."""
WarmStartFunction = Callable[[SAOConfig], None]
"""Makes sure `config.warm_start_dir()` holds a finished warm start."""


@dataclass(frozen=True)
class PlannedRun:
    """One arm at one seed, and where it lives."""

    arm: Arm
    seed: int
    run_dir: Path


def arms_of(claims: Iterable[Claim]) -> list[Arm]:
    """Every arm the claims need, each once, in first-needed order."""
    seen: dict[str, Arm] = {}
    for claim in claims:
        for arm in claim.arms:
            seen.setdefault(arm.key, arm)
    return list(seen.values())


def run_dir_for(out: Path, arm: Arm, seed: int) -> Path:
    return out / arm.key / f"seed{seed}"


def plan(claims: Iterable[Claim], seeds: int, out: Path) -> list[PlannedRun]:
    """The runs, seed-major: every arm at seed 0 first, so a partial study is paired soonest."""
    arms = arms_of(claims)
    return [
        PlannedRun(arm, seed, run_dir_for(out, arm, seed)) for seed in range(seeds) for arm in arms
    ]


def run_state(run_dir: Path) -> RunState:
    if (run_dir / "summary.json").is_file():
        return "finished"
    if (run_dir / "config.yaml").is_file():
        return "interrupted"
    return "new"


def run_config(arm: Arm, seed: int, budget: Budget, run_dir: Path) -> SAOConfig:
    """The config of `arm` at `seed`: env defaults <- budget (and its eval points for a timed
    arm) <- arm overrides <- seed, paths."""
    overrides = [
        f"env.name={arm.env}",
        *budget.overrides_for(arm.env),
        *(budget.timed if arm.timed else ()),
        *arm.overrides,
        f"train.seed={seed}",
        f"train.out={run_dir}",
    ]
    return load_config(arm.preset, None, overrides)


def execute(
    runs: list[PlannedRun],
    budget: Budget,
    run_fn: RunFunction,
    warm_start_fn: WarmStartFunction,
    progress: bool = True,
) -> dict[RunState, int]:
    """Run every planned run that is not finished; returns how many were in each state."""
    counts: dict[RunState, int] = {"finished": 0, "interrupted": 0, "new": 0}
    configs = [run_config(r.arm, r.seed, budget, r.run_dir) for r in runs]
    warmed: set[Path] = set()
    bar = tqdm(total=len(runs), desc="reproduce runs", unit="run", disable=not progress)
    try:
        for run, config in zip(runs, configs, strict=True):
            state = run_state(run.run_dir)
            counts[state] += 1
            bar.set_postfix_str(f"{run.arm.key} seed{run.seed}")
            if state != "finished":
                if config.warm_start_dir() not in warmed:
                    seed0 = config.train.model_copy(update={"seed": 0})
                    warm_start_fn(config.model_copy(update={"train": seed0}))
                    warmed.add(config.warm_start_dir())
                run_fn(config, run.run_dir, state == "interrupted")
            bar.update(1)
    finally:
        bar.close()
    return counts


def train_in_process(config: SAOConfig, run_dir: Path, resume: bool) -> None:
    """One run through `sao train`'s own path (checks, config.yaml, `sao.runtime.train.train`);
    a resumed run keeps its saved config.yaml, exactly as `sao train --resume RUN_DIR`."""
    from sao.runtime.launch import FixedFlags, preflight, resumed_config, write_config
    from sao.runtime.train import train

    if resume:
        config = resumed_config(run_dir, [], FixedFlags())
    preflight(config, run_dir)
    write_config(config, run_dir / "config.yaml")
    train(config, run_dir, resume=resume, progress=False)


def warm_start_once(config: SAOConfig) -> None:
    """Build the environment's warm start at `config.warm_start_dir()` unless it is there (an
    interrupted one continues where it stopped)."""
    from sao.runtime.train import ensure_policy

    ensure_policy(config, progress=True)
