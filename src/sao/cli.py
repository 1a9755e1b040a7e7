"""`sao ...`: the command line. Each command parses its flags here and hands off to one module."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from sao.config import PRESET_DESCRIPTIONS, ConfigError, load_config


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default="sao", help="preset name (see `sao presets`)")
    parser.add_argument("--config", dest="config_path", help="YAML file merged over the preset")
    _add_set_flag(parser, "dotted override, e.g. --set algo.eps_low=0.2 (repeatable)")
    parser.add_argument("--env", help="environment (shortcut for --set env.name=...)")


def _add_set_flag(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help_text
    )


def _add_import_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module first, e.g. one that registers your own environment (repeatable)",
    )


def _check_env(name: str) -> None:
    from sao.envs.registry import known_env_names

    if name.partition(":")[0] not in known_env_names():
        raise ConfigError(
            f"env.name: unknown environment {name!r}; known: {', '.join(known_env_names())} "
            "(register your own and pass --import MODULE)"
        )


def _config_from(args: argparse.Namespace, extra: Sequence[str] = ()):
    overrides = list(args.overrides)
    if getattr(args, "env", None):
        overrides.insert(0, f"env.name={args.env}")
    config = load_config(args.preset, args.config_path, [*overrides, *extra])
    _check_env(config.env.name)
    return config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sao",
        description="Single-Rollout Asynchronous Optimization for agentic RL.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    train = sub.add_parser("train", help="run RL training (default: SAO on calc, tiny model)")
    _add_config_flags(train)
    _add_import_flag(train)
    train.add_argument("--steps", type=int, help="learner steps (train.steps)")
    train.add_argument("--out", help="run directory (train.out; default: runs/<env>_<preset>)")
    train.add_argument("--backend", choices=["local", "ray"], help="runtime backend")
    train.add_argument("--ray-address", help="join an existing Ray cluster")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run")

    sft = sub.add_parser("sft", help="warm start: train the tiny policy on teacher demonstrations")
    sft.add_argument("--env", default="calc", help="environment whose demonstrations to use")
    sft.add_argument("--out", help="output directory (default: checkpoints/warm_start_<env>)")
    sft.add_argument("--steps", type=int, help="SFT optimizer steps")
    sft.add_argument("--seed", type=int, default=0)
    _add_set_flag(sft, "dotted override, e.g. --set sft.steps=200 (repeatable)")
    _add_import_flag(sft)

    ev = sub.add_parser("eval", help="held-out pass@1 of a policy (sampled)")
    ev.add_argument("--model", required=True, help="path of a saved policy")
    ev.add_argument("--env", default="calc")
    ev.add_argument("--n", type=int, default=200, help="held-out tasks")
    ev.add_argument("--samples", type=int, default=1, help="sampled trajectories per task")
    ev.add_argument(
        "--baseline",
        help="a second saved policy scored on the same tasks; prints the paired difference",
    )
    ev.add_argument("--json", dest="json_path", help="also write the results as JSON")
    ev.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sampling temperature (default: the env's rollout.temperature, as in training)",
    )
    ev.add_argument("--seed", type=int, default=0)
    _add_import_flag(ev)

    from sao.serve.cli import add_serve_arguments, add_simulate_arguments

    serve = sub.add_parser("serve", help="serve the policy (OpenAI API) and learn from feedback")
    _add_config_flags(serve)
    add_serve_arguments(serve)
    add_simulate_arguments(sub.add_parser("simulate", help="simulated users against `sao serve`"))

    presets = sub.add_parser("presets", help="list the presets (SAO and its baselines)")
    presets.set_defaults(command="presets")

    show = sub.add_parser("config", help="print the resolved config as YAML")
    _add_config_flags(show)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return _dispatch(args)
    except ConfigError as err:
        print(f"sao: config error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sao: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`sao presets | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _dispatch(args: argparse.Namespace) -> int:
    for module in getattr(args, "imports", []):
        importlib.import_module(module)
    if args.command == "presets":
        for name, text in PRESET_DESCRIPTIONS.items():
            print(f"{name:16s} {text}")
        return 0
    if args.command == "config":
        import yaml

        print(yaml.safe_dump(_config_from(args).model_dump(mode="json"), sort_keys=False), end="")
        return 0
    if args.command in ("sft", "eval"):
        _check_env(args.env)
    if args.command == "sft":
        from sao.warmstart import run_sft_command

        return run_sft_command(
            env=args.env, out=args.out, steps=args.steps, seed=args.seed, overrides=args.overrides
        )
    if args.command == "eval":
        from sao.evaluation import run_eval_command

        return run_eval_command(
            model=args.model,
            env=args.env,
            n=args.n,
            samples=args.samples,
            baseline=args.baseline,
            json_path=args.json_path,
            temperature=args.temperature,
            seed=args.seed,
        )
    if args.command == "serve":
        from sao.serve.cli import run_serve_command

        return run_serve_command(_config_from(args), args)
    if args.command == "simulate":
        from sao.serve.cli import run_simulate_command

        return run_simulate_command(args)
    if args.command == "train":
        from sao.runtime.train import run_train_command

        extra = []
        if args.steps is not None:
            extra.append(f"train.steps={args.steps}")
        if args.out:
            extra.append(f"train.out={args.out}")
        if args.backend:
            extra.append(f"train.backend={args.backend}")
        if args.ray_address:
            extra.append(f"train.ray_address={args.ray_address}")
        if args.resume:
            # The run's own config.yaml is the base; only what is given now overrides it.
            overrides = [*args.overrides, *extra]
            return run_train_command(None, resume=args.resume, overrides=overrides)
        return run_train_command(_config_from(args, extra))
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
