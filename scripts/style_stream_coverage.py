"""Print how often a saved policy samples each `style_stream` style, at the rollout temperature.

An on-policy learner can only reinforce a style it samples: a style with near-zero share under the
warm start cannot be found from the reward alone. This samples `--samples` replies to each of
`--n` held-out prompts and prints each style's share, the quality rate, and the reward the policy
would get were each style the preferred one.

python scripts/style_stream_coverage.py --model checkpoints/warm_start_style_stream --n 100
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from sao.agent_setup import build_agent_loop
from sao.config import load_config
from sao.envs.style_stream.metrics import UNSTYLED, reply_category
from sao.envs.style_stream.styles import STYLES
from sao.envs.style_stream.tasks import StyleStreamTaskSource
from sao.models.policy import load_policy


def main(argv: list[str] | None = None) -> None:
    """Sample the policy and print its style mix."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="saved policy directory")
    parser.add_argument("--n", type=int, default=100, help="held-out prompts")
    parser.add_argument("--samples", type=int, default=4, help="replies sampled per prompt")
    parser.add_argument("--temperature", type=float, default=None, help="default: the config's")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    overrides = ["env.name=style_stream"]
    if args.temperature is not None:
        overrides.append(f"rollout.temperature={args.temperature}")
    config = load_config(overrides=overrides)
    policy, tokenizer = load_policy(args.model)
    tasks = StyleStreamTaskSource().test(args.n, args.seed)
    loop = build_agent_loop(config, policy, tokenizer, seed=args.seed, for_training=False)
    try:
        episodes = [
            (f"cov-{i}-{k}", t, {}) for i, t in enumerate(tasks) for k in range(args.samples)
        ]
        trajectories = loop.run(episodes)
    finally:
        loop.close()
    infos = [t.metadata.get("info", {}) for t in trajectories]
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
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
