"""Claim (h)'s accuracy curves: each arm's held-out accuracy against training time and against
trajectories sampled, read into the report (`curves` of a claim entry) and drawn, one line per
arm and seed, with the targets of the seeds marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

from sao.reproduce.claims import Claim
from sao.reproduce.readers import MissingMetric
from sao.reproduce.study_data import StudyData

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def arm_curves(claim: Claim, data: StudyData) -> dict[str, list[dict[str, list] | None]]:
    """Per arm key, per seed: the run's recorded curve (`train_s`, `trajectories`, `accuracy`),
    or None for a run without one."""
    curves: dict[str, list[dict[str, list] | None]] = {}
    for arm in claim.arms:
        per_seed: list[dict[str, list] | None] = []
        for seed in range(data.seeds):
            try:
                per_seed.append(data.curve(arm.key, seed))
            except MissingMetric:
                per_seed.append(None)
        curves[arm.key] = per_seed
    return curves


def plot_curves(claim: dict[str, Any], path: Path) -> Path:
    """Accuracy against training seconds (left) and trajectories sampled (right) for every arm
    and seed of `claim` (an entry of `report.json`'s `claims`); returns `path`."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    styles = ["-", "--", ":", "-."]
    for color, (key, per_seed) in enumerate(claim["curves"].items()):
        for seed, curve in enumerate(per_seed):
            if curve is None:
                continue
            style = dict(color=f"C{color}", linestyle=styles[seed % len(styles)], marker=".")
            label = key if seed == 0 else None
            axes[0].plot(curve["train_s"], curve["accuracy"], label=label, **style)
            axes[1].plot(curve["trajectories"], curve["accuracy"], label=label, **style)
    targets = {t for comp in claim["comparisons"] for t in comp.get("targets", []) if t is not None}
    for ax, xlabel in zip(
        axes, ("training seconds (evals excluded)", "trajectories sampled"), strict=True
    ):
        for target in sorted(targets):
            ax.axhline(target, color="grey", linewidth=0.6, alpha=0.6)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel("held-out accuracy", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"({claim['id']}) accuracy curves (line style: seed; grey: targets): {claim['verdict']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
