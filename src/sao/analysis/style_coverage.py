"""`sao inspect style-coverage`: how often a saved policy samples each `style_stream` style, at
the rollout temperature.

An on-policy learner can only reinforce a style it samples: a style with near-zero share under the
warm start cannot be found from the reward alone. This samples `--samples` replies to each of
`--n` held-out prompts and prints each style's share, the quality rate, and the reward the policy
would get were each style the preferred one. With `--requests` it then asks for each style
outright on the same prompts (the line a requested prompt adds) and prints the share of replies
in the requested style: whether the policy can produce every style on request.

    sao inspect style-coverage --model checkpoints/warm_start_style_stream --n 100
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from sao.envs.style_stream.metrics import UNSTYLED, reply_category
from sao.envs.style_stream.styles import STYLES
from sao.envs.style_stream.tasks import StyleStreamTaskSource


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="saved policy directory")
    parser.add_argument("--n", type=int, default=100, help="held-out prompts")
    parser.add_argument("--samples", type=int, default=4, help="replies sampled per prompt")
    parser.add_argument("--temperature", type=float, default=None, help="default: the config's")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the numbers here")
    parser.add_argument(
        "--requests", action="store_true", help="also request each style on the same prompts"
    )


def run(args: argparse.Namespace) -> int:
    """Sample the policy and print its style mix."""
    from sao.config import load_config
    from sao.models.policy import load_policy
    from sao.preflight import check_output_file, check_policy_dir
    from sao.rollout.setup import build_agent_loop

    check_policy_dir(args.model, "--model")
    if args.json:
        check_output_file(args.json, "--json")
    overrides = ["env.name=style_stream"]
    if args.temperature is not None:
        overrides.append(f"rollout.temperature={args.temperature}")
    config = load_config(overrides=overrides)
    policy, tokenizer = load_policy(args.model)
    source = StyleStreamTaskSource()
    tasks = source.test(args.n, args.seed)
    loop = build_agent_loop(config, policy, tokenizer, seed=args.seed, for_training=False)

    def sample(prompts: list, label: str) -> list[dict]:
        episodes = [
            (f"{label}-{i}-{k}", t, {}) for i, t in enumerate(prompts) for k in range(args.samples)
        ]
        return [t.metadata.get("info", {}) for t in loop.run(episodes)]

    try:
        infos = sample(tasks, "cov")
        requested = (
            {s: sample([source.request(t, s) for t in tasks], f"req-{s}") for s in STYLES}
            if args.requests
            else {}
        )
    finally:
        loop.close()
    total = len(infos)
    styles = Counter(reply_category(info.get("reply"), info.get("style")) for info in infos)
    good = [info for info in infos if info.get("quality")]
    result = {
        "n": total,
        "temperature": config.rollout.temperature,
        "share": {s: styles[s] / total for s in (*STYLES, *UNSTYLED)},
        "quality_rate": len(good) / total,
        "reward_if_preferred": {s: sum(i.get("style") == s for i in good) / total for s in STYLES},
    }
    print(f"{total} replies at temperature {result['temperature']}")
    for s in (*STYLES, *UNSTYLED):
        line = f"{s:<11} share {result['share'][s]:.3f}"
        if s in STYLES:
            line += f"  reward if preferred {result['reward_if_preferred'][s]:.3f}"
        print(line)
    print(f"quality     {result['quality_rate']:.3f}")
    if requested:
        result["requested"] = {
            s: {
                "in_style": sum(i.get("style") == s for i in got) / len(got),
                "rewarded": sum(i.get("style") == s and bool(i.get("quality")) for i in got)
                / len(got),
            }
            for s, got in requested.items()
        }
        for s, r in result["requested"].items():
            print(
                f"asked {s:<11} in that style {r['in_style']:.3f}  "
                f"with quality too {r['rewarded']:.3f}"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0
