"""`sao inspect retry-warm-start`: a code_repair warm start from a teacher that retries more often
after a failed test, to test whether RL's retries go malformed because the default warm start
rarely saw one (14% of its demonstrations retry, only after a wrong fix of the right line). It
writes a policy (it is the experiment's set-up, kept beside the analyses of its runs):

    sao inspect retry-warm-start --p-retry 1.0 --out checkpoints/warm_start_code_repair_retry
    sao train --env code_repair --set model.path=checkpoints/warm_start_code_repair_retry ...

Everything but the teacher's `p_retry` is as `sao sft --env code_repair` does it: the packaged
`sft` settings, the same number of demonstrations, the same seed.
"""

from __future__ import annotations

import argparse

from sao.analysis.runs import InspectError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--p-retry", type=float, required=True, help="teacher's retry probability")
    parser.add_argument("--out", required=True, help="directory of the warm-start policy")
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    if not 0.0 <= args.p_retry <= 1.0:
        raise InspectError(f"--p-retry: must be a probability, got {args.p_retry}")
    from sao.config import load_config
    from sao.envs.code_repair import teacher as code_repair_teacher
    from sao.preflight import check_output_dir
    from sao.warmstart.sft import warm_start

    check_output_dir(args.out, "--out")
    config = load_config("sao", None, ["env.name=code_repair"]).sft
    teacher = code_repair_teacher.CodeRepairTeacher(p_retry=args.p_retry)
    demos = code_repair_teacher.demonstrations(
        config.num_demonstrations, args.seed, teacher=teacher
    )
    retried = sum(d.retried for d in demos) / len(demos)
    print(f"teacher: p_retry {args.p_retry}, {retried:.1%} of demonstrations retry")
    segments = [demo.segments() for demo in demos]
    warm_start("code_repair", args.out, config, seed=args.seed, demonstrations=segments)
    return 0
