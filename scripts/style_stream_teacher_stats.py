"""Print the `style_stream` teacher's reward under each preferred style, and its style mix.

python scripts/style_stream_teacher_stats.py --n 4000 --seed 0
"""

from __future__ import annotations

import argparse

from sao.envs.style_stream.styles import STYLES
from sao.envs.style_stream.tasks import StyleStreamTaskSource
from sao.envs.style_stream.teacher import demonstrations, summarize


def main(argv: list[str] | None = None) -> None:
    """Generate demonstrations with each style preferred in turn and print their summaries."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=4000, help="demonstrations per preferred style")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--p-bad", type=float, default=0.1)
    args = parser.parse_args(argv)
    for style in STYLES:
        # One phase as long as the run: every prompt prefers `style`.
        source = StyleStreamTaskSource(schedule=(style,), switch_every=10**9)
        demos = demonstrations(args.n, args.seed, p_bad=args.p_bad, source=source)
        stats = summarize(demos)
        print(
            f"preferred {style:<11} teacher reward {stats['accuracy']:.3f}  "
            f"quality {stats['quality_rate']:.3f}  share in style {stats['share_' + style]:.3f}"
        )
    print(f"chars mean          {stats['mean_chars']:.1f}")
    print("example:")
    print(demos[0].text)


if __name__ == "__main__":
    main()
