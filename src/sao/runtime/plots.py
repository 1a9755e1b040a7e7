"""PNG plots of a run's metrics (reward, accuracy, explained variance, DIS masks, PPO clipping,
critic gradient norms, staleness, how episodes ended)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sao.envs.registration import RunReport  # noqa: E402
from sao.runtime.drift import METRIC_PREFIX, NO_ANSWER, STANDARD_ENDINGS  # noqa: E402

PLOTTED_ENDINGS = (*STANDARD_ENDINGS, NO_ANSWER)

PANELS: dict[str, tuple[str, list[str]]] = {
    "reward.png": ("training reward", ["rollout/reward_mean"]),
    "accuracy.png": ("held-out pass@1", ["eval/accuracy"]),
    "explained_variance.png": ("critic explained variance", ["critic/vf_explained_var"]),
    "dis_mask.png": (
        "DIS masked fraction",
        [
            "actor/dis_masked_low",
            "actor/dis_masked_high",
            "actor/dis_would_mask_low",
            "actor/dis_would_mask_high",
        ],
    ),
    "pg_clipfrac.png": ("PPO clipped fraction", ["actor/pg_clipfrac"]),
    "critic_grad_norm.png": (
        "critic gradient norm",
        ["critic/grad_norm_shared", "critic/grad_norm_all"],
    ),
    "staleness.png": ("staleness (versions)", ["rollout/staleness_mean", "rollout/staleness_max"]),
    "endings.png": ("share of trained episodes", [METRIC_PREFIX + e for e in PLOTTED_ENDINGS]),
}


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
    return [p[0] for p in points], [float(p[1]) for p in points]


PRETRAIN_PANELS: dict[str, tuple[str, list[str]]] = {
    "value_pretrain.png": (
        "value pretraining",
        ["critic/vf_explained_var", "critic/vf_explained_var_heldout", "critic/vf_loss"],
    ),
}


def plot_metrics(
    rows: list[dict[str, Any]],
    out_dir: Path,
    title: str = "",
    panels: dict[str, tuple[str, list[str]]] = PANELS,
) -> list[Path]:
    """Write one PNG per panel that has data; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for filename, (label, keys) in panels.items():
        series = {key: _series(rows, key) for key in keys}
        if not any(xs for xs, _ in series.values()):
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for key, (xs, ys) in series.items():
            if xs:
                ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, label=key)
            low, high = _series(rows, f"{key}_ci_low"), _series(rows, f"{key}_ci_high")
            if low[0] and low[0] == high[0]:
                ax.fill_between(low[0], low[1], high[1], alpha=0.2, label=f"{key} 95% CI")
        ax.set_xlabel("learner step")
        ax.set_ylabel(label)
        ax.set_title(f"{title} {label}".strip())
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / filename
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def save_run_report(
    report: RunReport, rows: list[dict[str, Any]], out_dir: Path, title: str = ""
) -> list[Path]:
    """Draw an environment's report panels from the metric rows and save its figures as PNGs;
    returns the files written."""
    written = plot_metrics(rows, out_dir, title=title, panels=report.panels)
    for filename, figure in report.figures.items():
        path = out_dir / filename
        figure.savefig(path, dpi=100)
        written.append(path)
    return written
