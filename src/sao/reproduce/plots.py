"""One figure per claim: for each comparison, the per-seed values of both sides (a line joins
the two runs of one seed), titled with the mean difference, its 95% interval and the verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sao.reproduce.stats import interval_text  # noqa: E402


def plot_claim(claim: dict[str, Any], path: Path) -> Path:
    """Draw `claim` (an entry of `report.json`'s `claims`) to `path`; returns `path`."""
    comparisons = claim["comparisons"]
    fig, axes = plt.subplots(
        1, len(comparisons), figsize=(4.2 * len(comparisons), 3.8), squeeze=False
    )
    for ax, comp in zip(axes[0], comparisons, strict=True):
        pairs = list(zip(comp["left_values"], comp["right_values"], strict=True))
        for seed, (left, right) in enumerate(pairs):
            xs = [x for x, v in ((0, left), (1, right)) if v is not None]
            ys = [v for v in (left, right) if v is not None]
            ax.plot(xs, ys, marker="o", color=f"C{seed % 10}", label=f"seed {seed}")
        ax.set_xticks([0, 1], [comp["left"], comp["right"]], fontsize=7)
        ax.set_xlim(-0.4, 1.4)
        ax.set_ylabel(comp["metric"], fontsize=8)
        # A bracketed comparison's ends go on their own line, to keep the title inside the axes.
        interval = interval_text(comp).replace("; bracket ends ", "\nbracket ends ")
        ax.set_title(f"left - right: {interval}\n{comp['verdict']}", fontsize=8)
        ax.grid(alpha=0.3)
        if pairs:
            ax.legend(fontsize=7)
    fig.suptitle(f"({claim['id']}) {claim['statement']}: {claim['verdict']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
