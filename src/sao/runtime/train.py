"""`sao train`: warm start -> value pretraining -> asynchronous RL with periodic held-out eval.

One learner step is a pass of the learner loop (`sao.runtime.learner_loop`, the one `sao serve`
runs too), fed by the rollout backend (`_Rollouts`) and recorded by the run (`_RunSink`):

    batch = take_batch(backend, B)         # the first B completed, in completion order, whose
                                           # environment did not raise (`env_errors`); waits
                                           # only if the queue is empty
    batch = drop_stale(batch)              # only with rollout.max_staleness
    metrics = learner.step(batch)          # critic values -> advantages -> actor -> K critic steps
    backend.publish_weights(learner)       # engines swap between decode steps
    maybe eval, log, maybe checkpoint

Everything lands in a run directory (see `sao.runtime.run_dir`). A kill at any moment loses no
completed trajectory: each is logged the moment it arrives, and a resumed run (`--resume`) trains
every logged trajectory its checkpoint does not list as trained, first, before new ones. The
learner is checkpointed at step 0 (after value pretraining and the first eval), every
`train.checkpoint_every` steps and at the end.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm
from transformers import PreTrainedTokenizerBase

from sao.config import SAOConfig
from sao.envs.registration import EnvRegistration
from sao.envs.registry import registration_for
from sao.evaluation.held_out import evaluate
from sao.learner.step import Learner
from sao.models.lora import models_to_train, plain_copy
from sao.models.policy import load_policy, save_policy
from sao.plumbing.durable import rewrite_jsonl
from sao.plumbing.faults import pause_point
from sao.plumbing.memory import PhasePeaks
from sao.runtime.backends import make_backend
from sao.runtime.checkpoints import load_latest_checkpoint, save_checkpoint
from sao.runtime.drift import (
    DriftMonitor,
    drift_window,
    ending_metrics,
    replay,
    step_shares,
    warning_line,
)
from sao.runtime.env_errors import EnvErrorWatch, is_env_error, is_set_aside, take_batch
from sao.runtime.learner_loop import LearnerLoop, LoopStep
from sao.runtime.learner_ranks import LearnerRanks, build_learner, close_learner
from sao.runtime.pace import Pace
from sao.runtime.pretraining import run_value_pretraining
from sao.runtime.protocols import Backend, LearnerHandle
from sao.runtime.record import RunRecord
from sao.runtime.report import eval_metrics, write_report
from sao.runtime.run_dir import MetricsLogger, RunClock, read_metrics, read_trajectories
from sao.runtime.starting_policy import starting_policy
from sao.trajectory import Trajectory


@dataclass
class Run:
    """Everything the loop touches, set up once by `_begin`."""

    config: SAOConfig
    run_dir: Path
    learner: LearnerHandle
    tokenizer: PreTrainedTokenizerBase
    record: RunRecord
    log: MetricsLogger
    clock: RunClock
    registration: EnvRegistration
    drift: DriftMonitor
    env_errors: EnvErrorWatch
    memory: PhasePeaks


@dataclass
class Backlog:
    """Where the task stream continues after a resume.

    Attributes:
        pending: logged trajectories not yet trained (nor dropped), oldest first.
        start_index: index of the next new trajectory (past every logged one, whole groups).
        abandoned: indices below `start_index` that were in flight at the kill and will never
            arrive; the admission bound is shifted by them so the rollout side does not wait.
        set_aside: logged trajectories set aside for an environment error (never trained), by
            which the admission bound is shifted too.
        recent_errors: whether each settled episode's environment raised, in completion order
            (the start of the environment-error window).
    """

    pending: list[Trajectory]
    start_index: int
    abandoned: int
    set_aside: int = 0
    recent_errors: list[bool] = field(default_factory=list)


def train(config: SAOConfig, run_dir: Path, resume: bool = False, progress: bool = True) -> dict:
    """Run (or continue) training into `run_dir`; returns the summary written to summary.json.

    A missing warm start (`sao.runtime.starting_policy`) is trained first, on the run's clock:
    `wall_s` and `sessions.json` count it.
    """
    clock = RunClock(run_dir)
    memory = PhasePeaks()
    with memory.phase("warm_start"):
        start = starting_policy(config, progress)
    run, backlog = _begin(config, run_dir, resume, progress, clock, start, memory)
    try:
        return _train_and_finish(run, backlog, progress)
    finally:
        close_learner(run.learner)


def _train_and_finish(run: Run, backlog: Backlog, progress: bool) -> dict:
    config = run.config
    if run.learner.version >= config.train.steps:  # a finished run resumed: report again only
        if run.record.eval_accuracy_at_step is None:
            # Its checkpoint had no eval at its own step (`--steps` lowered on resume): the
            # report must not pass the last eval before it off as the final one.
            run.record.last_eval = held_out_eval(run.learner, run.tokenizer, config)
            run.record.eval_accuracy_at_step = run.record.last_eval["accuracy"]
            _checkpoint(run)
        run.log.close()
        return _finish(run, in_flight=0)
    with run.memory.phase("training"):
        in_flight = _train_with_backend(run, backlog, progress)
    return _finish(run, in_flight)


def _train_with_backend(run: Run, backlog: Backlog, progress: bool) -> int:
    """The training steps, with the rollout side started for them and closed after; returns
    how many episodes were still in flight when the last step was taken."""
    config, run_dir = run.config, run.run_dir
    backend: Backend | None = None
    try:
        backend = make_backend(
            config,
            plain_copy(run.learner.policy),
            run.tokenizer,
            version=run.learner.version,
            start_index=backlog.start_index,
            abandoned=backlog.abandoned + backlog.set_aside,
            log_dir=run_dir,
        )
        run.learner = backend.attach_learner(run.learner)
        backend.requeue(backlog.pending)
        backend.start()
        _train_loop(
            run,
            backend,
            progress,
            Pace.resumed(run.run_dir, backlog.start_index - backlog.abandoned),
        )
        return int(backend.rollout_stats()["in_flight"])
    finally:
        if backend is not None:
            backend.close()
        run.log.close()


def held_out_eval(learner: LearnerHandle, tokenizer: Any, config: SAOConfig) -> dict[str, Any]:
    """Sampled pass@1 of the learner's current policy on the held-out split."""
    return evaluate(
        learner.policy,
        tokenizer,
        config,
        config.train.eval_n,
        seed=config.train.seed,
        version=learner.version,
    )


# ---------------------------------------------------------------------------------- set-up
def _begin(
    config: SAOConfig,
    run_dir: Path,
    resume: bool,
    progress: bool,
    clock: RunClock,
    start: Path,
    memory: PhasePeaks,
) -> tuple[Run, Backlog]:
    """Policy, learner and record, from the newest intact checkpoint or from scratch."""
    torch.manual_seed(config.train.seed)
    with memory.phase("loading"):
        policy, tokenizer = load_policy(start)
        clock.beat()
        checkpoint = load_latest_checkpoint(run_dir) if resume else None
        policy, critic = models_to_train(policy, config.model.lora, config.critic.enabled)
    value_pretrain_s = 0.0
    if checkpoint is None and critic is not None and config.critic.pretrain.num_trajectories:
        pause_point("value-pretraining")
        started = time.perf_counter()
        with memory.phase("value_pretraining"):
            curve = run_value_pretraining(config, policy, tokenizer, critic, progress)
        value_pretrain_s = time.perf_counter() - started
        rewrite_jsonl(run_dir / "value_pretrain.jsonl", curve)
        clock.beat()
    with memory.phase("loading"):
        learner = build_learner(policy, config, critic, tokenizer.pad_token_id)
    try:
        return _set_up_run(
            config, run_dir, resume, clock, learner, tokenizer, checkpoint, memory, value_pretrain_s
        )
    except BaseException:
        close_learner(learner)
        raise


def _set_up_run(
    config: SAOConfig,
    run_dir: Path,
    resume: bool,
    clock: RunClock,
    learner: Learner | LearnerRanks,
    tokenizer: PreTrainedTokenizerBase,
    checkpoint: tuple[dict[str, Any], RunRecord] | None,
    memory: PhasePeaks,
    value_pretrain_s: float = 0.0,
) -> tuple[Run, Backlog]:
    """The run around a built learner: restored from `checkpoint` when there is one, else given
    its first held-out eval and step-0 checkpoint (its row also holds the training clock's zero
    and `time/value_pretrain_s`, the seconds value pretraining took before it)."""
    record = RunRecord()
    if checkpoint is not None:
        with memory.phase("loading"):
            learner.load_state_dict(checkpoint[0])
        record = checkpoint[1]
    # Rows of steps the checkpoint does not cover are replayed, so they are removed first.
    keep_through = (record.step if checkpoint is not None else -1) if resume else None
    log = MetricsLogger(run_dir, keep_through=keep_through)
    # Seeded with the rows kept, so a resumed run compares with its real first steps and does
    # not warn again about a crossing it already reported.
    drift = replay(
        read_metrics(run_dir),
        drift_window(config.train.steps, config.train.drift_window),
        config.train.drift_warn_rise,
    )
    backlog = _backlog(run_dir, record, config.rollout.group_size) if resume else Backlog([], 0, 0)
    env_errors = EnvErrorWatch(
        config.train.env_error_window, config.train.max_env_error_rate, backlog.recent_errors
    )
    run = Run(
        config,
        run_dir,
        learner,
        tokenizer,
        record,
        log,
        clock,
        registration_for(config.env.name),
        drift,
        env_errors,
        memory,
    )
    if record.initial_eval is None:
        with memory.phase("evals"):
            record.initial_eval = record.last_eval = held_out_eval(learner, tokenizer, config)
        record.eval_accuracy_at_step = record.initial_eval["accuracy"]
        log.log(
            0,
            {
                **eval_metrics(record.initial_eval),
                "time/train_s": 0.0,
                "time/value_pretrain_s": value_pretrain_s,
                "rollout/trajectories_sampled": 0,
                "rollout/trajectories_trained": 0,
            },
        )
        _checkpoint(run)
    return run, backlog


def _backlog(run_dir: Path, record: RunRecord, group_size: int) -> Backlog:
    """What a resumed run owes the learner, and where its task stream continues."""
    logged = read_trajectories(run_dir)
    settled = record.settled()
    pending = [t for t in logged if t.metadata["index"] not in settled]
    top = 1 + max((t.metadata["index"] for t in logged), default=-1)
    start_index = -(-top // group_size) * group_size
    return Backlog(
        pending,
        start_index,
        abandoned=start_index - len(logged),
        set_aside=sum(map(is_set_aside, logged)),
        recent_errors=[is_env_error(t) for t in logged if t.metadata["index"] in settled],
    )


# ---------------------------------------------------------------------------------- the loop
def _train_loop(run: Run, backend: Backend, progress: bool, pace: Pace) -> None:
    config = run.config
    loop = LearnerLoop(
        run.learner,
        _Rollouts(run, backend, pace),
        _RunSink(run, backend, pace),
        publish=lambda: backend.publish_weights(run.learner),
        batch_size=config.train.batch_size,
        max_staleness=config.rollout.max_staleness,
    )
    bar = tqdm(
        total=config.train.steps,
        initial=run.learner.version,
        desc="train",
        disable=not progress,
        dynamic_ncols=True,
    )
    try:
        while run.learner.version < config.train.steps:
            step = loop.step()
            if step is None or step.phase != "actor_critic":
                continue  # the whole batch was too stale
            metrics = step.metrics
            bar.update(1)
            bar.set_postfix(
                reward=f"{metrics['rollout/reward_mean']:.2f}",
                acc=f"{run.record.last_eval['accuracy']:.2f}",
                stale=f"{metrics['rollout/staleness_mean']:.1f}",
                traj_s=f"{metrics['perf/trajectories_per_s']:.1f}",
            )
    finally:
        bar.close()


class _Rollouts:
    """The loop's source in training: the backend's first completed trajectories, those whose
    environment raised set aside (`env_errors`); waits only while the queue is empty."""

    def __init__(self, run: Run, backend: Backend, pace: Pace) -> None:
        self.run, self.backend, self.pace = run, backend, pace
        self.where = str(run.run_dir / "trajectories.jsonl")

    def take(self, size: int) -> list[tuple[int, Trajectory]]:
        (batch, aside), self.pace.wait = self.pace.timed(
            lambda n: take_batch(self.backend, n, self.run.env_errors, self.where), size
        )
        self.run.record.set_aside_indices += [t.metadata["index"] for t in aside]
        return [(t.metadata["index"], t) for t in batch]


class _RunSink:
    """The loop's sink in training: the record, the step's metrics row, evals, drift warnings
    and checkpoints (see the module docstring)."""

    def __init__(self, run: Run, backend: Backend, pace: Pace) -> None:
        self.run, self.backend, self.pace = run, backend, pace

    def record(self, step: LoopStep) -> None:
        run, record = self.run, self.run.record
        config = run.config
        record.dropped_indices += [int(key) for key, _ in step.dropped]
        if step.phase != "actor_critic":
            return
        batch = step.trajectories()
        metrics = step.metrics
        record.trained_indices += [int(key) for key, _ in step.kept]
        record.step = version = run.learner.version
        metrics.update(ending_metrics([t.metadata for t in batch]))
        if run.registration.step_metrics is not None:
            metrics.update(run.registration.step_metrics(batch))
        stats = self.backend.rollout_stats()
        run.env_errors.observe_reset_failures(int(stats.get("dropped", 0)))
        metrics["rollout/env_errors"] = run.env_errors.step_count()
        metrics.update(self.pace.metrics(self.pace.wait, len(batch), stats, record))
        tokens = metrics.get("learner/rank_tokens_total")
        if tokens is not None and metrics["time/learner_step"] > 0:
            metrics["perf/learner_tokens_per_s"] = tokens / metrics["time/learner_step"]
        at_end = version >= config.train.steps
        record.eval_accuracy_at_step = None
        every = config.train.eval_every
        if (
            at_end
            or (every and version % every == 0)
            or self.pace.eval_due(config.train.eval_every_s)
        ):
            pause_point(f"eval:{version}")
            metrics.update(_eval_off_the_clock(run, self.backend, self.pace))
        run.log.log(version, metrics)
        _watch_drift(run, {"step": version, **metrics})
        pause_point(f"step-logged:{version}")
        if at_end or version % config.train.checkpoint_every == 0:
            _checkpoint(run)
        run.clock.beat()


def _eval_off_the_clock(run: Run, backend: Backend, pace: Pace) -> dict[str, float]:
    """A held-out eval whose time is taken off the training clock. The local backend pauses its
    rollout side for it, so nothing trains or samples on eval time; the Ray backend cannot pause,
    so there the engine samples on while the clock stands (which is why it refuses
    `train.eval_every_s`)."""
    config, record = run.config, run.record
    pause = config.train.backend == "local"
    started = time.perf_counter()
    if pause:
        backend.pause_rollout()
    try:
        with run.memory.phase("evals"):
            record.last_eval = held_out_eval(run.learner, run.tokenizer, config)
    finally:
        if pause:
            backend.resume_rollout()
    seconds = time.perf_counter() - started
    pace.eval_done(seconds, config.train.eval_every_s)
    record.eval_accuracy_at_step = record.last_eval["accuracy"]
    return {
        **eval_metrics(record.last_eval),
        "time/eval_s": seconds,
        "time/eval_total_s": pace.eval_s,
    }


def _watch_drift(run: Run, row: dict[str, Any]) -> None:
    """One line on stderr when endings without an answer cross `train.drift_warn_rise`."""
    step = step_shares(row)
    check = run.drift.observe(step) if step is not None else None
    if check is not None:
        tqdm.write(warning_line(check, run.config.train.drift_warn_rise), file=sys.stderr)


def _checkpoint(run: Run) -> None:
    with run.memory.phase("checkpoints"):
        save_checkpoint(
            run.run_dir,
            run.learner.version,
            # Written before the next step, so the learner's own tensors, not a copy of them.
            run.learner.state_dict(snapshot=False),
            run.record,
            keep=run.config.train.keep_checkpoints,
        )


# ---------------------------------------------------------------------------------- reporting
def _finish(run: Run, in_flight: int) -> dict[str, Any]:
    """Save the trained policy (like a warm start: `sao eval --model RUN_DIR/policy`, or another
    run's `model.path`), then plots and `summary.json`."""
    # A plain checkpoint, adapters merged, that transformers and `sao eval --model` load as is.
    with run.memory.phase("saving_policy"):
        save_policy(plain_copy(run.learner.policy), run.tokenizer, run.run_dir / "policy")
    return write_report(
        run.config,
        run.run_dir,
        run.record,
        run.registration,
        run.clock.total_s(),
        in_flight,
        run.memory,
    )
