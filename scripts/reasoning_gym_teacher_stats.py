"""Print the `reasoning_gym:<dataset>` teacher's mean reward and demonstration length.

python scripts/reasoning_gym_teacher_stats.py --dataset basic_arithmetic --n 2000 --seed 0
"""

from __future__ import annotations

import argparse

from sao.envs.reasoning_gym.teacher import demonstrations


def main(argv: list[str] | None = None) -> None:
    """Generate demonstrations for one dataset and print their summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default="basic_arithmetic")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    demos = demonstrations(args.dataset, args.n, args.seed)
    lengths = [len(demo.text) for demo in demos]
    print(f"reasoning_gym:{args.dataset}: {len(demos)} demonstrations (seed {args.seed})")
    print(f"teacher mean reward {sum(d.reward for d in demos) / len(demos):.3f}")
    print(f"exactly right       {sum(d.reward == 1.0 for d in demos) / len(demos):.3f}")
    print(f"chars mean / max    {sum(lengths) / len(lengths):.1f} / {max(lengths)}")
    print("example:")
    print(demos[0].text)


if __name__ == "__main__":
    main()
