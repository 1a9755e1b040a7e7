"""`sao train`: warm start -> value pretraining -> asynchronous RL with periodic held-out eval.

One learner step, as the driver sees it:

    batch = backend.next_batch(B)          # completion order; waits only if the queue is empty
    metrics = learner.step(batch)          # critic values -> advantages -> actor -> K critic steps
    backend.publish(weights, version)      # engines swap between decode steps

Everything lands in a run directory (see `sao.runtime.run_dir`); `--resume RUN_DIR` continues
after Ctrl-C or a kill: completed trajectories are logged the moment they arrive, so none is lost,
and the checkpoint records which were trained, so none is trained twice.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
import yaml
from tqdm import tqdm

from sao.config import SAOConfig, load_config, save_config
from sao.envs.registry import registration_for
from sao.evaluation import evaluate, paired_difference
from sao.learner.step import Learner
from sao.models.critic import ValueModel
from sao.models.policy import load_policy, save_policy
from sao.runtime.backends import make_backend
from sao.runtime.plots import PRETRAIN_PANELS, plot_metrics, save_run_report
from sao.runtime.pretraining import run_value_pretraining
from sao.runtime.run_dir import (
    MetricsLogger,
    load_latest_checkpoint,
    read_metrics,
    read_trajectories,
    save_checkpoint,
)
from sao.warmstart import warm_start


def ensure_policy(config: SAOConfig) -> Path:
    """The policy to start from: `model.path`, else the warm start (run `sao sft` if missing)."""
    if config.model.path:
        path = Path(config.model.path)
        if not path.exists():
            raise SystemExit(f"sao train: model.path {path} does not exist")
        return path
    path = config.warm_start_dir()
    if not (path / "config.json").exists():
        print(
            f"sao train: no warm-start policy at {path}; running `sao sft --env {config.env.name}`"
        )
        warm_start(config.env.name, path, config.sft, seed=config.train.seed)
    return path


def held_out_eval(learner: Learner, tokenizer: Any, config: SAOConfig) -> dict[str, Any]:
    """Sampled pass@1 of the learner's current policy on the held-out split."""
    return evaluate(
        learner.policy,
        tokenizer,
        config,
        config.train.eval_n,
        seed=config.train.seed,
        version=learner.version,
    )


def _eval_metrics(result: dict[str, Any]) -> dict[str, float]:
    lo, hi = result["accuracy_ci95"]
    return {
        "eval/accuracy": result["accuracy"],
        "eval/accuracy_ci_low": lo,
        "eval/accuracy_ci_high": hi,
        "eval/tool_call_rate": result["tool_call_rate"],
        "eval/format_error_rate": result["format_error_rate"],
        "eval/mean_turns": result["mean_turns"],
    }


def run_train_command(
    config: SAOConfig | None, resume: str | None = None, overrides: list[str] | None = None
) -> int:
    """Entry point of `sao train` (see the module docstring).

    With `resume`, the run's saved `config.yaml` is loaded and `overrides` (e.g. a larger
    `train.steps`) are applied over it; `config` is then ignored.
    """
    if resume:
        run_dir = Path(resume)
        if not (run_dir / "config.yaml").exists():
            raise SystemExit(f"sao train: --resume {run_dir} has no config.yaml")
        saved = yaml.safe_load((run_dir / "config.yaml").read_text())
        config = load_config(saved.get("preset", "sao"), run_dir / "config.yaml", overrides or [])
        save_config(config, run_dir / "config.yaml")
    else:
        if config is None:
            raise ValueError("run_train_command: a config is needed unless resuming")
        run_dir = config.run_dir()
        if (run_dir / "checkpoints" / "latest").exists():
            raise SystemExit(
                f"sao train: {run_dir} already holds a run; use --resume {run_dir} or --out NEW_DIR"
            )
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(config, run_dir / "config.yaml")
    summary = train(config, run_dir, resume=bool(resume))
    print(json.dumps(summary, indent=2))
    return 0


def train(config: SAOConfig, run_dir: Path, resume: bool = False, progress: bool = True) -> dict:
    """Run (or continue) training into `run_dir`; returns the summary written to summary.json."""
    t_start = time.time()
    torch.manual_seed(config.train.seed)
    policy, tokenizer = load_policy(ensure_policy(config))
    metrics_log = MetricsLogger(run_dir)
    checkpoint = load_latest_checkpoint(run_dir) if resume else None

    critic = ValueModel.from_policy(policy) if config.critic.enabled else None
    if checkpoint is None and critic is not None and config.critic.pretrain.num_trajectories:
        run_value_pretraining(
            config, policy, tokenizer, critic, progress, log_path=run_dir / "value_pretrain.jsonl"
        )
    learner = Learner(policy, config, critic, pad_token_id=tokenizer.pad_token_id)

    book: dict[str, Any] = {"trained_indices": [], "dropped_indices": [], "initial_eval": None}
    pending: list = []
    if checkpoint is not None:
        learner.load_state_dict(checkpoint[0])
        book = checkpoint[1]
        done = set(book["trained_indices"]) | set(book["dropped_indices"])
        pending = [t for t in read_trajectories(run_dir) if t.metadata["index"] not in done]
    logged = read_trajectories(run_dir) if resume else []
    start_index = 1 + max((t.metadata["index"] for t in logged), default=-1)

    if book["initial_eval"] is None:
        book["initial_eval"] = held_out_eval(learner, tokenizer, config)
        metrics_log.log(learner.version, _eval_metrics(book["initial_eval"]))

    backend = make_backend(
        config,
        learner.policy,
        tokenizer,
        version=learner.version,
        start_index=start_index,
        log_dir=run_dir,
    )
    learner = backend.attach_learner(learner)
    backend.requeue(pending)
    registration = registration_for(config.env.name)
    backend.start()
    last_eval = book["initial_eval"]
    bar = tqdm(
        total=config.train.steps,
        initial=learner.version,
        desc="train",
        disable=not progress,
        dynamic_ncols=True,
    )
    t_loop, waited = time.perf_counter(), 0.0
    trained_this_session = 0
    try:
        while learner.version < config.train.steps:
            t0 = time.perf_counter()
            batch = backend.next_batch(config.train.batch_size)
            wait = time.perf_counter() - t0
            waited += wait
            batch, stale = _split_stale(batch, learner.version, config.rollout.max_staleness)
            book["dropped_indices"] += [t.metadata["index"] for t in stale]
            if not batch:
                continue
            metrics = learner.step(batch)
            if registration.step_metrics is not None:
                metrics.update(registration.step_metrics(batch))
            backend.publish(learner.policy_state_dict(), learner.version)
            book["trained_indices"] += [t.metadata["index"] for t in batch]
            trained_this_session += len(batch)
            elapsed = time.perf_counter() - t_loop
            stats = backend.rollout_stats()
            metrics.update(
                {
                    "time/wait_for_batch": wait,
                    "perf/trajectories_per_s": trained_this_session / elapsed,
                    "perf/engine_idle_frac": stats["engine_idle_frac"],
                    "perf/learner_idle_frac": waited / elapsed,
                    "rollout/dropped_stale": len(book["dropped_indices"]),
                    "rollout/queued": stats["queued"],
                }
            )
            step = learner.version
            at_end = step >= config.train.steps
            if at_end or (config.train.eval_every and step % config.train.eval_every == 0):
                last_eval = held_out_eval(learner, tokenizer, config)
                metrics.update(_eval_metrics(last_eval))
            metrics_log.log(step, metrics)
            if at_end or step % config.train.checkpoint_every == 0:
                save_checkpoint(run_dir, step, learner.state_dict(), book)
            bar.update(1)
            bar.set_postfix(
                reward=f"{metrics['rollout/reward_mean']:.2f}",
                acc=f"{last_eval['accuracy']:.2f}",
                stale=f"{metrics['rollout/staleness_mean']:.1f}",
                traj_s=f"{metrics['perf/trajectories_per_s']:.1f}",
            )
        in_flight = backend.rollout_stats()["in_flight"]
    finally:
        bar.close()
        backend.close()
        metrics_log.close()

    # The trained policy in the same format as a warm start: `sao eval --model RUN_DIR/policy`,
    # or `model.path` of another run.
    policy.load_state_dict(learner.policy_state_dict())
    save_policy(policy, tokenizer, run_dir / "policy")
    summary = _summary(config, run_dir, book, last_eval, time.time() - t_start, in_flight)
    rows = read_metrics(run_dir)
    plot_metrics(rows, run_dir / "plots", title=f"{config.preset} on {config.env.name}:")
    pretrain_log = run_dir / "value_pretrain.jsonl"
    if pretrain_log.exists():
        curve = [json.loads(line) for line in pretrain_log.read_text().splitlines()]
        plot_metrics(curve, run_dir / "plots", panels=PRETRAIN_PANELS)
    if registration.run_report is not None:
        report = registration.run_report(rows)
        summary.update(report.summary)
        save_run_report(report, rows, run_dir / "plots", title=config.env.name)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _split_stale(batch: list, version: int, bound: int | None) -> tuple[list, list]:
    """`(kept, dropped)`: trajectories older than `rollout.max_staleness` are dropped, counted."""
    if bound is None:
        return batch, []
    return (
        [t for t in batch if t.staleness(version) <= bound],
        [t for t in batch if t.staleness(version) > bound],
    )


def _paired_gain(initial: dict[str, Any], final: dict[str, Any]) -> dict[str, Any] | None:
    """Final minus initial pass@1, paired over the held-out tasks (None for an older run's book)."""
    if "task_scores" not in initial or "task_scores" not in final:
        return None
    return paired_difference(final["task_scores"], initial["task_scores"])


def _summary(
    config: SAOConfig, run_dir: Path, book: dict, final: dict, wall_s: float, in_flight: int
) -> dict[str, Any]:
    initial = book["initial_eval"]
    completed = len(read_trajectories(run_dir))
    trained = len(book["trained_indices"])
    dropped = len(book["dropped_indices"])
    return {
        "preset": config.preset,
        "env": config.env.name,
        "steps": config.train.steps,
        "initial_accuracy": initial["accuracy"],
        "initial_accuracy_ci95": initial["accuracy_ci95"],
        "final_accuracy": final["accuracy"],
        "final_accuracy_ci95": final["accuracy_ci95"],
        "eval_n": final["n"],
        # Both evals score the same held-out tasks, so the per-task difference is the sharper test.
        "accuracy_gain": _paired_gain(initial, final),
        "wall_s": wall_s,
        "trajectories_completed": completed,
        "trajectories_trained": trained,
        "trajectories_dropped_stale": dropped,
        "trajectories_untrained_in_queue": completed - trained - dropped,
        "in_flight_abandoned": in_flight,
    }
