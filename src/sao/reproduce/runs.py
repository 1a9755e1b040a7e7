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
import signal
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Literal

from tqdm import tqdm

from sao.config import SAOConfig, load_config
from sao.reproduce.budgets import Budget
from sao.reproduce.claims import Arm, Claim

RunState = Literal["finished", "interrupted", "new"]
STOP_GRACE_S = 30.0
"""How long a worker told to stop may take to exit before it is terminated."""
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
    the runs then train `workers` at a time, each in a worker process given an equal share of
    the cores as torch threads (`run_in_workers`); `run_fn` must then be a module-level
    function (it is pickled).
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
    """`todo` in up to `workers` processes at a time, the next started as one ends.

    A run that fails stops the study: its error is raised here (the worker's traceback chained
    under it), and the runs still training are stopped, as is every worker when this process
    is interrupted; each continues from its last checkpoint when the study is run again.
    """
    threads = max(1, cpu_count() // workers)
    context = multiprocessing.get_context("spawn")
    pending = list(todo)
    running: dict[BaseProcess, tuple[PlannedRun, Connection]] = {}
    try:
        while pending or running:
            while pending and len(running) < workers:
                run, config, resume = pending.pop(0)
                receive, send = context.Pipe(duplex=False)
                process = context.Process(
                    target=run_in_worker,
                    args=(run_fn, config, run.run_dir, resume, threads, send),
                    name=f"{run.arm.key} seed{run.seed}",
                )
                process.start()
                send.close()
                running[process] = (run, receive)
            wait([process.sentinel for process in running] + [r for _, r in running.values()])
            for process, (run, receive) in list(running.items()):
                if receive.poll():
                    try:
                        err, text = receive.recv()
                    except EOFError:  # the worker is exiting
                        process.join()
                    else:
                        raise worker_error(err, text, run)
                if process.exitcode is None:
                    continue
                del running[process]
                receive.close()
                if process.exitcode != 0:
                    raise RuntimeError(
                        f"{run.run_dir}: its worker process ended with exit code {process.exitcode}"
                    )
                bar.set_postfix_str(f"{run.arm.key} seed{run.seed} done")
                bar.update(1)
    finally:
        stop_workers(running)


def stop_workers(running: dict[BaseProcess, tuple[PlannedRun, Connection]]) -> None:
    """Interrupt the workers still training (as Ctrl-C would, so each exits through its own
    cleanup), then terminate any that has not exited within `STOP_GRACE_S`."""
    for process in running:
        if process.pid is not None and process.exitcode is None:
            os.kill(process.pid, signal.SIGINT)
    for process, (_, receive) in running.items():
        process.join(STOP_GRACE_S)
        if process.exitcode is None:
            process.terminate()
            process.join()
        receive.close()


class WorkerTraceback(Exception):
    """The traceback of an error raised in a worker process, chained under it here."""


def run_in_worker(
    run_fn: RunFunction,
    config: SAOConfig,
    run_dir: Path,
    resume: bool,
    threads: int,
    errors: Connection,
) -> None:
    """A worker process: one run on `threads` torch threads; an error goes back through
    `errors` with its traceback (read as it is sent, so a long one cannot fill the pipe and
    block), and the worker exits with 1."""
    limit_threads(threads)
    try:
        run_fn(config, run_dir, resume)
    except BaseException as err:
        text = traceback.format_exc()
        try:
            errors.send((err, text))
        except Exception:
            errors.send((RuntimeError(f"{type(err).__name__}: {err}"), text))
        sys.exit(1)


def worker_error(err: BaseException, text: str, run: PlannedRun) -> BaseException:
    """The error a worker sent back, its traceback chained under it."""
    err.__cause__ = WorkerTraceback(f"in the worker training {run.run_dir}:\n{text}")
    return err


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
    from sao.runtime.starting_policy import starting_policy

    starting_policy(config, progress=True)
