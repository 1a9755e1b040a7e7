"""Print the `calc` teacher's accuracy, tool use and demonstration length.

python scripts/calc_teacher_stats.py --n 1000 --seed 0
"""

from __future__ import annotations

import argparse

from sao.envs.calc.teacher import CalcTeacher, demonstrations, summarize


def main(argv: list[str] | None = None) -> None:
    """Generate demonstrations through the real sandbox and print their summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="number of demonstrations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=("train", "test"), default="test")
    parser.add_argument("--p-no-tool", type=float, default=0.35)
    parser.add_argument("--p-slip", type=float, default=0.15)
    args = parser.parse_args(argv)
    teacher = CalcTeacher(p_no_tool=args.p_no_tool, p_slip=args.p_slip)
    demos = demonstrations(args.n, args.seed, split=args.split, teacher=teacher)
    stats = summarize(demos)
    print(f"demonstrations      {stats.count} ({args.split}, seed {args.seed})")
    print(f"teacher accuracy    {stats.accuracy:.3f}")
    print(f"tool use            {stats.tool_rate:.3f}")
    for level, accuracy in stats.accuracy_by_difficulty.items():
        print(f"  difficulty {level}      {accuracy:.3f}")
    print(f"chars mean / max    {stats.mean_chars:.1f} / {stats.max_chars}")
    print("example:")
    print(demos[0].text)


if __name__ == "__main__":
    main()
