"""Print the `code_repair` teacher's accuracy, mistake mix and demonstration length.

python scripts/code_repair_teacher_stats.py --n 2000 --seed 0
python scripts/code_repair_teacher_stats.py --n 100 --sandbox   # same, observations from the sandbox
"""

from __future__ import annotations

import argparse
import time

from sao.envs.code_repair.env import CodeRepairEnv
from sao.envs.code_repair.teacher import CodeRepairTeacher, demonstrations, summarize


def main(argv: list[str] | None = None) -> None:
    """Generate demonstrations and print their summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000, help="number of demonstrations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=("train", "test"), default="test")
    parser.add_argument("--sandbox", action="store_true", help="run tests in the real sandbox")
    args = parser.parse_args(argv)
    teacher = CodeRepairTeacher(env=CodeRepairEnv()) if args.sandbox else CodeRepairTeacher()
    start = time.perf_counter()
    demos = demonstrations(args.n, args.seed, split=args.split, teacher=teacher)
    seconds = time.perf_counter() - start
    stats = summarize(demos)
    runner = "sandbox" if args.sandbox else "in-process"
    print(f"demonstrations      {stats.count} ({args.split}, seed {args.seed}, {runner})")
    print(f"teacher accuracy    {stats.accuracy:.3f}")
    for attempt, share in stats.share_by_attempt.items():
        accuracy = stats.accuracy_by_attempt[attempt]
        print(f"  {attempt:<12} share {share:.3f}  accuracy {accuracy:.3f}")
    print(f"retry rate          {stats.retry_rate:.3f}")
    print(f"chars mean / max    {stats.mean_chars:.1f} / {stats.max_chars}")
    print(f"generation          {stats.count / seconds:.0f} demonstrations/s")
    print("example:")
    print(demos[0].text)


if __name__ == "__main__":
    main()
