"""The runs of a study: one per (arm, seed), each in `OUT/<arm>/seed<k>/`, resumable.

A run whose `summary.json` exists is finished and skipped; a run directory with a `config.yaml`
but no summary was interrupted and is resumed under its own saved config (as `sao train
--resume`); anything else starts fresh. Arms shared by several claims run once per seed. Every
arm of an environment starts from the same warm start, built once (seed 0) before its runs. The
runs go one at a time in this process, or through a pool of worker processes.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
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
    workers: int = 1,
) -> dict[RunState, int]:
    """Run every planned run that is not finished; returns how many were in each state.

    The warm starts the unfinished runs need are built first, one at a time. With `workers` > 1
    the runs then go `workers` at a time to worker processes, each given an equal share of the
    cores as torch threads; `run_fn` must then be a module-level function (it is pickled).
    """
    counts: dict[RunState, int] = {"finished": 0, "interrupted": 0, "new": 0}
    todo: list[tuple[PlannedRun, SAOConfig, bool]] = []
    for run in runs:
        state = run_state(run.run_dir)
        counts[state] += 1
        if state != "finished":
            config = run_config(run.arm, run.seed, budget, run.run_dir)
            todo.append((run, config, state == "interrupted"))
    warmed: set[Path] = set()
    for _, config, _ in todo:
        if config.warm_start_dir() not in warmed:
            seed0 = config.train.model_copy(update={"seed": 0})
            warm_start_fn(config.model_copy(update={"train": seed0}))
            warmed.add(config.warm_start_dir())
    bar = tqdm(total=len(runs), desc="reproduce runs", unit="run", disable=not progress)
    bar.update(counts["finished"])
    try:
        if workers == 1:
            for run, config, resume in todo:
                bar.set_postfix_str(f"{run.arm.key} seed{run.seed}")
                run_fn(config, run.run_dir, resume)
                bar.update(1)
        else:
            run_in_workers(todo, run_fn, workers, bar)
    finally:
        bar.close()
    return counts


def run_in_workers(
    todo: list[tuple[PlannedRun, SAOConfig, bool]],
    run_fn: RunFunction,
    workers: int,
    bar: tqdm,
) -> None:
    """`todo` through a pool of `workers` processes, each taking the next run as it frees up;
    the first run that fails cancels those not yet started and is raised."""
    threads = max(1, cpu_count() // workers)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=limit_threads, initargs=(threads,)
    ) as pool:
        futures = {
            pool.submit(run_fn, config, run.run_dir, resume): run for run, config, resume in todo
        }
        try:
            for future in as_completed(futures):
                future.result()
                run = futures[future]
                bar.set_postfix_str(f"{run.arm.key} seed{run.seed} done")
                bar.update(1)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def limit_threads(threads: int) -> None:
    """A worker's torch threads: its share of the cores, so workers do not oversubscribe them."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)


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
