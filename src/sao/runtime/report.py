"""The end of a run: the trained policy, plots, and `summary.json` (whole run, across resumes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sao.config import SAOConfig
from sao.envs.registration import EnvRegistration
from sao.evaluation.stats import eval_resolution, paired_difference, resolution_line
from sao.plumbing.durable import atomic_write_json, read_jsonl
from sao.plumbing.memory import PhasePeaks
from sao.runtime.drift import drift_summary, drift_window
from sao.runtime.plots import PRETRAIN_PANELS, plot_metrics, save_run_report
from sao.runtime.record import RunRecord
from sao.runtime.run_dir import read_metrics, read_trajectories


def eval_metrics(result: dict[str, Any]) -> dict[str, float]:
    """A held-out eval's result as `eval/...` metrics."""
    lo, hi = result["accuracy_ci95"]
    return {
        "eval/accuracy": result["accuracy"],
        "eval/accuracy_ci_low": lo,
        "eval/accuracy_ci_high": hi,
        "eval/tool_call_rate": result["tool_call_rate"],
        "eval/format_error_rate": result["format_error_rate"],
        "eval/mean_turns": result["mean_turns"],
    }


def write_report(
    config: SAOConfig,
    run_dir: Path,
    record: RunRecord,
    registration: EnvRegistration,
    wall_s: float,
    in_flight: int,
    memory: PhasePeaks,
) -> dict[str, Any]:
    """Draw the plots and write `summary.json`; returns the summary."""
    rows = read_metrics(run_dir)
    plot_metrics(rows, run_dir / "plots", title=f"{config.preset} on {config.env.name}:")
    curve = read_jsonl(run_dir / "value_pretrain.jsonl")
    if curve:
        plot_metrics(curve, run_dir / "plots", panels=PRETRAIN_PANELS)
    summary = summarize(config, run_dir, record, wall_s, in_flight, memory)
    gain = summary["accuracy_gain"]
    if gain is not None:
        resolution = eval_resolution(gain, config.train.eval_effect)
        summary["eval_resolution"] = {**resolution, "line": resolution_line(gain, resolution)}
    window = drift_window(config.train.steps, config.train.drift_window)
    summary["drift"] = drift_summary(rows, window, config.train.drift_warn_rise)
    if registration.run_report is not None:
        report = registration.run_report(rows)
        summary.update(report.summary)
        save_run_report(report, rows, run_dir / "plots", title=config.env.name)
    atomic_write_json(run_dir / "summary.json", summary)
    return summary


def summarize(
    config: SAOConfig,
    run_dir: Path,
    record: RunRecord,
    wall_s: float,
    in_flight: int,
    memory: PhasePeaks,
) -> dict[str, Any]:
    """The summary fields: accuracies with intervals, their paired gain, wall time, counts."""
    initial, final = record.initial_eval, record.last_eval
    assert initial is not None and final is not None, "summarize: the run has not been evaluated"
    completed = len(read_trajectories(run_dir))
    trained = len(record.trained_indices)
    dropped = len(record.dropped_indices)
    set_aside = len(record.set_aside_indices)
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
        # Kept in trajectories.jsonl with their error, never trained (`sao.runtime.env_errors`).
        "trajectories_set_aside": set_aside,
        "trajectories_untrained_in_queue": completed - trained - dropped - set_aside,
        # Episodes whose environment raised, reset failures (no trajectory) included.
        "env_errors": sum(int(row.get("rollout/env_errors", 0)) for row in read_metrics(run_dir)),
        "in_flight_abandoned": in_flight,
        **_learner_pace(read_metrics(run_dir)),
        # This process's own peak (a resumed run: this invocation's; Ray actors and learner
        # ranks are other processes), and the peak of each part of the run (`PhasePeaks`).
        "peak_rss_gb": memory.peak_gb(),
        "peak_rss_gb_by_phase": memory.by_phase(),
    }


def _learner_pace(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Seconds the learner spent in its steps, and the tokens a second it trained on."""
    timed = [r for r in rows if "time/learner_step" in r and "learner/rank_tokens_total" in r]
    seconds = sum(float(r["time/learner_step"]) for r in timed)
    tokens = sum(float(r["learner/rank_tokens_total"]) for r in timed)
    return {
        "learner_s": seconds if timed else None,
        "learner_tokens_per_s": tokens / seconds if seconds > 0 else None,
    }


def _paired_gain(initial: dict[str, Any], final: dict[str, Any]) -> dict[str, Any] | None:
    """Final minus initial pass@1 paired over the held-out tasks (None when an eval from an older
    version of `sao` lacks the per-task scores)."""
    if "task_scores" not in initial or "task_scores" not in final:
        return None
    return paired_difference(final["task_scores"], initial["task_scores"])


def env_error_line(summary: dict[str, Any]) -> str | None:
    """A console line when environments raised during the run (None when none did)."""
    errors = summary.get("env_errors") or 0
    if not errors:
        return None
    return (
        f"sao train: {errors} episode(s) ended in an environment error; "
        f"{summary.get('trajectories_set_aside', 0)} trajectories were set aside untrained "
        "(trajectories.jsonl, metadata.error)"
    )


def closing_line(summary: dict[str, Any]) -> str | None:
    """The console's last line of a run: whether its held-out eval resolves the effect of
    interest (None for a summary without a paired gain)."""
    resolution = summary.get("eval_resolution")
    return None if resolution is None else f"sao train: {resolution['line']}"
