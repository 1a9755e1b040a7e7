"""A code_repair warm start from a teacher that retries more often after a failed test, to test
whether RL's retries go malformed because the default warm start rarely saw one (14% of its
demonstrations retry, only after a wrong fix of the right line).

python scripts/code_repair_retry_warm_start.py --p-retry 1.0 --out checkpoints/warm_start_code_repair_retry
sao train --env code_repair --set model.path=checkpoints/warm_start_code_repair_retry ...

Everything but the teacher's `p_retry` is as `sao sft --env code_repair` does it: the packaged
`sft` settings, the same number of demonstrations, the same seed.
"""

from __future__ import annotations

import argparse

from sao.config import load_config
from sao.envs.code_repair.teacher import CodeRepairTeacher, demonstrations
from sao.warmstart import warm_start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--p-retry", type=float, required=True, help="teacher's retry probability")
    parser.add_argument("--out", required=True, help="directory of the warm-start policy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    config = load_config("sao", None, ["env.name=code_repair"]).sft
    teacher = CodeRepairTeacher(p_retry=args.p_retry)
    demos = demonstrations(config.num_demonstrations, args.seed, teacher=teacher)
    retried = sum(d.retried for d in demos) / len(demos)
    print(f"teacher: p_retry {args.p_retry}, {retried:.1%} of demonstrations retry")
    segments = [demo.segments() for demo in demos]
    warm_start("code_repair", args.out, config, seed=args.seed, demonstrations=segments)


if __name__ == "__main__":
    main()
