"""`sao inspect teacher-stats --env NAME`: a scripted teacher's accuracy and demonstrations, the
numbers behind each environment's "teacher" column (`docs/environments.md`):

- `calc`: accuracy, tool use, accuracy by difficulty, demonstration length (through the real
  sandbox); `--split`, `--p-no-tool`, `--p-slip`;
- `code_repair`: accuracy, the mistake mix by attempt, retry rate, length, generation speed;
  `--split`, `--sandbox` (observations from the real sandbox instead of in-process tests);
- `style_stream`: the reward under each preferred style, its style mix, and how it follows the
  prompts that request a style (a share `--request-rate` of them, as in `sao sft`); `--p-bad`;
- `reasoning_gym:DATASET` (`reasoning_gym` alone: `basic_arithmetic`): mean reward, exactly
  right, length.

Each prints one example demonstration last.

    sao inspect teacher-stats --env calc --n 1000 --seed 0
    sao inspect teacher-stats --env code_repair --n 100 --sandbox
"""

from __future__ import annotations

import argparse
import time

from sao.analysis.runs import InspectError

ENVS = ("calc", "code_repair", "style_stream", "reasoning_gym")
DEFAULT_N = {"calc": 1000, "code_repair": 2000, "style_stream": 4000, "reasoning_gym": 2000}
# The flags only some teachers take, with the environments that take them.
OWN_FLAGS = {
    "split": ("calc", "code_repair"),
    "p_no_tool": ("calc",),
    "p_slip": ("calc",),
    "sandbox": ("code_repair",),
    "p_bad": ("style_stream",),
    "request_rate": ("style_stream",),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env", required=True, help="calc, code_repair, style_stream, reasoning_gym[:DATASET]"
    )
    parser.add_argument(
        "--n",
        type=int,
        help="demonstrations (per preferred style on "
        "style_stream; default: " + ", ".join(f"{k} {v}" for k, v in DEFAULT_N.items()) + ")",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--split", choices=("train", "test"), help="calc, code_repair (default test)"
    )
    parser.add_argument("--p-no-tool", type=float, help="calc (default 0.35)")
    parser.add_argument("--p-slip", type=float, help="calc (default 0.15)")
    parser.add_argument(
        "--sandbox",
        action="store_true",
        default=None,
        help="code_repair: run tests in the real sandbox",
    )
    parser.add_argument("--p-bad", type=float, help="style_stream (default 0.1)")
    parser.add_argument(
        "--request-rate",
        type=float,
        help="style_stream: share of requested prompts (default: sao sft's)",
    )


def run(args: argparse.Namespace) -> int:
    env, _, dataset = args.env.partition(":")
    if env not in ENVS or (dataset and env != "reasoning_gym"):
        raise InspectError(
            f"--env: no teacher for {args.env!r}; known: {', '.join(ENVS)}[:DATASET]"
        )
    for flag, envs in OWN_FLAGS.items():
        if getattr(args, flag) is not None and env not in envs:
            raise InspectError(
                f"--{flag.replace('_', '-')}: applies to --env {' or '.join(envs)}, not {env}"
            )
    n = DEFAULT_N[env] if args.n is None else args.n
    if n < 1:
        raise InspectError(f"--n: must be >= 1, got {n}")
    if env == "calc":
        _calc(n, args)
    elif env == "code_repair":
        _code_repair(n, args)
    elif env == "style_stream":
        _style_stream(n, args)
    else:
        _reasoning_gym(dataset or "basic_arithmetic", n, args.seed)
    return 0


def _calc(n: int, args: argparse.Namespace) -> None:
    from sao.envs.calc.teacher import CalcTeacher, demonstrations, summarize

    split = args.split or "test"
    teacher = CalcTeacher(
        p_no_tool=0.35 if args.p_no_tool is None else args.p_no_tool,
        p_slip=0.15 if args.p_slip is None else args.p_slip,
    )
    demos = demonstrations(n, args.seed, split=split, teacher=teacher)
    stats = summarize(demos)
    print(f"demonstrations      {stats.count} ({split}, seed {args.seed})")
    print(f"teacher accuracy    {stats.accuracy:.3f}")
    print(f"tool use            {stats.tool_rate:.3f}")
    for level, accuracy in stats.accuracy_by_difficulty.items():
        print(f"  difficulty {level}      {accuracy:.3f}")
    print(f"chars mean / max    {stats.mean_chars:.1f} / {stats.max_chars}")
    print("example:")
    print(demos[0].text)


def _code_repair(n: int, args: argparse.Namespace) -> None:
    from sao.envs.code_repair.env import CodeRepairEnv
    from sao.envs.code_repair.teacher import CodeRepairTeacher, demonstrations, summarize

    split = args.split or "test"
    teacher = CodeRepairTeacher(env=CodeRepairEnv()) if args.sandbox else CodeRepairTeacher()
    start = time.perf_counter()
    demos = demonstrations(n, args.seed, split=split, teacher=teacher)
    seconds = time.perf_counter() - start
    stats = summarize(demos)
    runner = "sandbox" if args.sandbox else "in-process"
    print(f"demonstrations      {stats.count} ({split}, seed {args.seed}, {runner})")
    print(f"teacher accuracy    {stats.accuracy:.3f}")
    for attempt, share in stats.share_by_attempt.items():
        accuracy = stats.accuracy_by_attempt[attempt]
        print(f"  {attempt:<12} share {share:.3f}  accuracy {accuracy:.3f}")
    print(f"retry rate          {stats.retry_rate:.3f}")
    print(f"chars mean / max    {stats.mean_chars:.1f} / {stats.max_chars}")
    print(f"generation          {stats.count / seconds:.0f} demonstrations/s")
    print("example:")
    print(demos[0].text)


def _style_stream(n: int, args: argparse.Namespace) -> None:
    from sao.envs.style_stream.styles import STYLES
    from sao.envs.style_stream.tasks import StyleStreamTaskSource
    from sao.envs.style_stream.teacher import SFT_REQUEST_RATE, demonstrations, summarize

    p_bad = 0.1 if args.p_bad is None else args.p_bad
    rate = SFT_REQUEST_RATE if args.request_rate is None else args.request_rate
    for style in STYLES:
        # One phase as long as the run: every unrequested prompt prefers `style`.
        source = StyleStreamTaskSource(schedule=(style,), switch_every=10**9)
        demos = demonstrations(n, args.seed, p_bad=p_bad, request_rate=rate, source=source)
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


def _reasoning_gym(dataset: str, n: int, seed: int) -> None:
    from sao.envs.reasoning_gym.teacher import demonstrations

    demos = demonstrations(dataset, n, seed)
    lengths = [len(demo.text) for demo in demos]
    print(f"reasoning_gym:{dataset}: {len(demos)} demonstrations (seed {seed})")
    print(f"teacher mean reward {sum(d.reward for d in demos) / len(demos):.3f}")
    print(f"exactly right       {sum(d.reward == 1.0 for d in demos) / len(demos):.3f}")
    print(f"chars mean / max    {sum(lengths) / len(lengths):.1f} / {max(lengths)}")
    print("example:")
    print(demos[0].text)
