"""Print the `style_stream` teacher's reward under each preferred style, its style mix, and how
it follows the prompts that request a style (a share `--request-rate` of them, as in `sao sft`).

python scripts/style_stream_teacher_stats.py --n 4000 --seed 0
"""

from __future__ import annotations

import argparse

from sao.envs.style_stream.styles import STYLES
from sao.envs.style_stream.tasks import StyleStreamTaskSource
from sao.envs.style_stream.teacher import SFT_REQUEST_RATE, demonstrations, summarize


def main(argv: list[str] | None = None) -> None:
    """Generate demonstrations with each style preferred in turn and print their summaries."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=4000, help="demonstrations per preferred style")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--p-bad", type=float, default=0.1)
    parser.add_argument(
        "--request-rate", type=float, default=SFT_REQUEST_RATE, help="share of requested prompts"
    )
    args = parser.parse_args(argv)
    for style in STYLES:
        # One phase as long as the run: every unrequested prompt prefers `style`.
        source = StyleStreamTaskSource(schedule=(style,), switch_every=10**9)
        demos = demonstrations(
            args.n, args.seed, p_bad=args.p_bad, request_rate=args.request_rate, source=source
        )
        stats = summarize(demos)
        print(
            f"preferred {style:<11} teacher reward {stats['accuracy_unrequested']:.3f} "
            f"unrequested, {stats['accuracy']:.3f} all  quality {stats['quality_rate']:.3f}  "
            f"unrequested share in style {stats['share_' + style]:.3f}"
        )
    print(
        f"requested share     {stats['requested_share']:.3f}, in the requested style "
        f"{stats['request_followed']:.3f}; requests per style "
        + ", ".join(f"{s} {stats['requested_' + s]:.3f}" for s in STYLES)
    )
    print(f"chars mean          {stats['mean_chars']:.1f}")
    print("example:")
    print(demos[0].text)


if __name__ == "__main__":
    main()
