"""`sao ...`: the command line. Each command parses its flags here and hands off to one module.

Every command that runs a model takes its settings the same way (`--preset`, `--config`, `--set`,
`--env`), and checks its inputs and outputs (`sao.preflight`) before any work. Bad input ends with
one line on stderr and a non-zero exit; `--debug` (or `SAO_DEBUG=1`) shows the traceback instead.
A run that stops itself on purpose (`sao.plumbing.stopped.RunStopped`, e.g. too many
environment errors) ends the same way, with exit status 1.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from sao.config import (
    PRESETS,
    ConfigError,
    SAOConfig,
    algorithm_overrides,
    load_config,
    load_run_config,
)
from sao.evaluation.scores_file import reusable_scores
from sao.plumbing.stopped import RunStopped
from sao.preflight import (
    check_engine,
    check_env,
    check_one_learner_process,
    check_output_dir,
    check_output_file,
    check_policy_dir,
    check_trainable,
    learning_rate_warning,
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the usage itself is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse `type` for integers >= `minimum`, refusing others in one line."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer >= {minimum}, got {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)
_nonnegative_int = _int_at_least(0)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value:g}")
    return value


def _add_common_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the traceback of an error (also: SAO_DEBUG=1)",
    )


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", help="preset name (default: sao; see `sao presets`)")
    parser.add_argument("--config", dest="config_path", help="YAML file merged over the preset")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="dotted override, e.g. --set algo.eps_low=0.2 (repeatable)",
    )
    parser.add_argument("--env", help="environment (shortcut for --set env.name=...)")
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module first, e.g. one that registers your own environment (repeatable)",
    )
    _add_common_flags(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sao", description="Single-Rollout Asynchronous Optimization.")
    _add_common_flags(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    train = sub.add_parser("train", help="run RL training (default: SAO on calc, tiny model)")
    _add_config_flags(train)
    train.add_argument("--steps", type=_positive_int, help="learner steps (train.steps)")
    train.add_argument("--out", help="run directory (train.out; default: runs/<env>_<preset>)")
    train.add_argument("--backend", choices=["local", "ray"], help="runtime backend")
    train.add_argument("--ray-address", help="join an existing Ray cluster")
    train.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue an interrupted run under its saved config.yaml (--set still applies)",
    )
    train.add_argument(
        "--quick",
        action="store_true",
        help="the whole pipeline at toy size in about a minute (sao.runtime.quick)",
    )

    sft = sub.add_parser("sft", help="warm start: train the tiny policy on teacher demonstrations")
    _add_config_flags(sft)
    sft.add_argument("--out", help="output directory (default: model.warm_start_dir)")
    sft.add_argument("--steps", type=_positive_int, help="SFT optimizer steps (sft.steps)")
    sft.add_argument("--seed", type=int, help="seed (default: train.seed)")

    ev = sub.add_parser("eval", help="held-out pass@1 of a policy (sampled)")
    _add_config_flags(ev)
    ev.add_argument(
        "--run",
        metavar="RUN_DIR",
        help="evaluate RUN_DIR/policy under the run's own config.yaml (--set still applies)",
    )
    ev.add_argument("--model", help="path of a saved policy (default with --run: RUN_DIR/policy)")
    ev.add_argument(
        "--step",
        type=_nonnegative_int,
        metavar="N",
        help="with --run: the policy of the run's checkpoint at learner step N "
        "(RUN_DIR/checkpoints/step_N) instead of its final one",
    )
    ev.add_argument("--n", type=_positive_int, help="held-out tasks (default: train.eval_n)")
    ev.add_argument(
        "--samples", type=_positive_int, default=1, help="sampled trajectories per task"
    )
    ev.add_argument(
        "--baseline",
        help="a second saved policy scored on the same tasks; prints the paired difference",
    )
    ev.add_argument(
        "--baseline-scores",
        metavar="EVAL_JSON",
        help="instead of --baseline: reuse the baseline scores of an earlier `--json` result "
        "(refused unless scored with the same policy, tasks, seed and settings)",
    )
    ev.add_argument("--json", dest="json_path", help="also write the results as JSON")
    ev.add_argument(
        "--temperature",
        type=_positive_float,
        help="sampling temperature (rollout.temperature; default: the config's, as in training)",
    )
    ev.add_argument("--seed", type=int, help="task and sampling seed (default: train.seed)")

    from sao.serve.cli import add_serve_arguments, add_simulate_arguments

    serve = sub.add_parser("serve", help="serve the policy (OpenAI API) and learn from feedback")
    _add_config_flags(serve)
    add_serve_arguments(serve)
    add_simulate_arguments(sub.add_parser("simulate", help="simulated users against `sao serve`"))
    export = sub.add_parser(
        "export", help="the policy a `sao serve` database has trained, as a policy directory"
    )
    _add_common_flags(export)
    export.add_argument("--db", required=True, help="the server's SQLite file (read-only)")
    export.add_argument("--model", required=True, help="the policy directory the server served")
    export.add_argument("--out", required=True, help="new policy directory to write")

    gguf = sub.add_parser(
        "import-gguf", help="write a GGUF file (llama.cpp, Ollama) as a Hugging Face checkpoint"
    )
    _add_common_flags(gguf)
    gguf.add_argument("file", help="the .gguf file")
    gguf.add_argument("--out", required=True, help="new checkpoint directory to write")
    gguf.add_argument(
        "--dtype",
        choices=["float32", "bfloat16"],
        default="float32",
        help="weights' dtype in the checkpoint (default: float32, what the learner trains)",
    )

    presets = sub.add_parser("presets", help="list the presets (SAO and its baselines)")
    _add_common_flags(presets)

    show = sub.add_parser("config", help="print the resolved config as YAML")
    _add_config_flags(show)

    rep = sub.add_parser(
        "reproduce", help="check the paper's claims (a)-(g), and time to accuracy (h), over seeds"
    )
    _add_common_flags(rep)
    rep.add_argument(
        "--claims",
        type=_claim_letters,
        help="claims, e.g. c,f or h,h_latency (default: the paper's a-g)",
    )
    rep.add_argument("--seeds", type=_positive_int, default=3, help="seeds per arm (default: 3)")
    rep.add_argument("--budget", choices=["quick", "full"], default="quick", help="run size")
    rep.add_argument("--out", default="runs/reproduce", help="study directory (resumable)")
    rep.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="runs trained at a time, the cores shared among them (default: 1; claims that "
        "time their runs need 1)",
    )
    rep.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing; report what has finished (unfinished claims: 'not run')",
    )

    from sao.analysis.cli import add_inspect_arguments

    inspect = sub.add_parser("inspect", help="the analyses docs cite, of runs, evals and teachers")
    _add_common_flags(inspect)
    add_inspect_arguments(inspect)
    return parser


def _claim_letters(text: str) -> list[str]:
    from sao.reproduce.command import parse_claims

    try:
        return parse_claims(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _debug_requested(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "debug", False)) or os.environ.get("SAO_DEBUG", "") not in ("", "0")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    prog = f"sao {args.command}"
    debug = _debug_requested(args)
    try:
        return _dispatch(args, prog)
    except ConfigError as err:
        if debug:
            traceback.print_exc()
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    except RunStopped as err:
        if debug:
            traceback.print_exc()
        print(f"{prog}: stopped: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`sao presets | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as err:
        if debug:
            raise
        lines = str(err).strip().splitlines()
        what = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
        print(f"{prog}: {what} (--debug or SAO_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 1


def _import_modules(modules: Sequence[str]) -> None:
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            raise ConfigError(f"--import {module}: {err}") from None


def _config_from(
    args: argparse.Namespace, prog: str, extra: Sequence[str] = (), trains: bool = True
) -> SAOConfig:
    """The config of `--preset`, `--config`, `--env`, `--set` (+ `extra`), checked before use."""
    overrides = list(args.overrides)
    if args.env:
        overrides.insert(0, f"env.name={args.env}")
    config = load_config(args.preset, args.config_path, [*overrides, *extra])
    _check_config(config, prog, trains)
    return config


def _check_config(config: SAOConfig, prog: str, trains: bool = True) -> None:
    """What every command refuses alike; for a command that `trains` with the algorithm, warns
    of each algorithm setting the preset did not set (`sao eval` and `sao sft` use none)."""
    check_env(config)
    check_engine(config)
    if config.model.path:
        check_policy_dir(config.model.path, "model.path")
    if config.model.warm_start_from and not config.model.path:
        check_policy_dir(config.model.warm_start_from, "model.warm_start_from")
    for line in algorithm_overrides(config) if trains else ():
        print(f"{prog}: warning: {line}", file=sys.stderr)


def _dispatch(args: argparse.Namespace, prog: str) -> int:
    _import_modules(getattr(args, "imports", []))
    if args.command == "presets":
        for name, preset in PRESETS.items():
            print(f"{name:16s} {preset.description}")
        return 0
    if args.command == "config":
        import yaml

        config = _config_from(args, prog)
        check_trainable(config)
        print(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), end="")
        return 0
    if args.command == "sft":
        return _sft(args, prog)
    if args.command == "eval":
        return _eval(args, prog)
    if args.command == "serve":
        from sao.serve.cli import run_serve_command

        config = _config_from(args, prog)
        check_trainable(config)
        check_one_learner_process(config, "sao serve")
        check_policy_dir(args.model, "--model")
        _warn_of_tiny_rates(config, args.model, prog)
        return run_serve_command(config, args)
    if args.command == "export":
        return _export(args, prog)
    if args.command == "import-gguf":
        return _import_gguf(args, prog)
    if args.command == "simulate":
        from sao.serve.cli import run_simulate_command

        return run_simulate_command(args)
    if args.command == "train":
        return _train(args, prog)
    if args.command == "inspect":
        from sao.analysis.cli import run_inspect_command

        return run_inspect_command(args)
    if args.command == "reproduce":
        from sao.reproduce.claims import PAPER_CLAIMS
        from sao.reproduce.command import run_reproduce_command

        claims = args.claims or list(PAPER_CLAIMS)
        return run_reproduce_command(
            claims,
            args.seeds,
            args.budget,
            args.out,
            report_only=args.report_only,
            workers=args.workers,
        )
    raise AssertionError(f"unhandled command {args.command}")


def _sft(args: argparse.Namespace, prog: str) -> int:
    steps = [f"sft.steps={args.steps}"] if args.steps else []
    config = _config_from(args, prog, steps, trains=False)
    out = check_output_dir(args.out or config.warm_start_dir(), "--out")
    seed = config.train.seed if args.seed is None else args.seed
    from sao.warmstart import (
        sft as warmstart,  # torch and transformers load only after every check passed
    )

    warmstart.warm_start(
        config.env.name,
        out,
        config.sft,
        seed=seed,
        model_path=config.model.path or config.model.warm_start_from or None,
        env_options=config.env.options,
    )
    return 0


def _eval(args: argparse.Namespace, prog: str) -> int:
    extra = [f"rollout.temperature={args.temperature}"] if args.temperature else []
    checkpoint = None
    if args.step is not None and (not args.run or args.model):
        raise ConfigError("--step N needs --run RUN_DIR and no --model (it names a checkpoint)")
    if args.run:
        _refuse_with(args, "--run", "it evaluates under the run's own config.yaml")
        config = load_run_config(args.run, [*args.overrides, *extra])
        _check_config(config, prog, trains=False)
        if args.step is not None:
            checkpoint, model = _checkpoint_and_its_model(Path(args.run), args.step, config)
        elif args.model:
            model = check_policy_dir(args.model, "--model")
        else:
            model = check_policy_dir(Path(args.run) / "policy", "--run")
    elif args.model:
        config = _config_from(args, prog, extra, trains=False)
        model = check_policy_dir(args.model, "--model")
    else:
        raise ConfigError("--model PATH or --run RUN_DIR is required")
    n = args.n or config.train.eval_n
    seed = config.train.seed if args.seed is None else args.seed
    if args.baseline and args.baseline_scores:
        raise ConfigError("--baseline and --baseline-scores: give one (scores reused, or scored)")
    if args.baseline:
        check_policy_dir(args.baseline, "--baseline")
    baseline_scores = None
    if args.baseline_scores:
        baseline_scores = reusable_scores(
            args.baseline_scores, config, n=n, seed=seed, samples=args.samples
        )
    if args.json_path:
        check_output_file(args.json_path, "--json")
    # torch loads only after every check passed
    from sao.evaluation.held_out import run_eval_command
    from sao.runtime.checkpoints import checkpoint_policy_state

    weights = checkpoint_policy_state(checkpoint) if checkpoint is not None else None
    return run_eval_command(
        config,
        model,
        n=n,
        json_path=args.json_path,
        seed=seed,
        samples=args.samples,
        baseline=args.baseline,
        weights=weights,
        weights_from=str(checkpoint) if checkpoint is not None else None,
        baseline_scores=baseline_scores,
        baseline_scores_from=args.baseline_scores,
    )


def _checkpoint_and_its_model(run: Path, step: int, config: SAOConfig) -> tuple[Path, Path]:
    """The checkpoint directory of `step` in `run`, and a saved model of the same architecture
    for its weights: the run's final policy, else the policy the run started from."""
    from sao.runtime.checkpoints import checkpoint_dir

    try:
        checkpoint = checkpoint_dir(run, step)
    except ValueError as err:
        raise ConfigError(f"--step {step}: {err}") from None
    # A LoRA run's checkpoints hold adapters of the model it started from, not of its result.
    if not config.model.lora.rank and (run / "policy" / "config.json").is_file():
        return checkpoint, check_policy_dir(run / "policy", "--run")
    start = config.model.path or config.warm_start_dir()
    return checkpoint, check_policy_dir(start, "the run's starting policy")


def _export(args: argparse.Namespace, prog: str) -> int:
    model = check_policy_dir(args.model, "--model")
    out = check_output_dir(args.out, "--out")
    from sao.serve.export import export_policy  # torch loads only after every check passed

    try:
        version = export_policy(Path(args.db), Path(model), Path(out))
    except ValueError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    print(f"{prog}: policy version {version} written to {out}", file=sys.stderr)
    return 0


def _import_gguf(args: argparse.Namespace, prog: str) -> int:
    from sao.models.gguf_import import GGUFImportError, check_gguf_file, check_output

    try:
        check_gguf_file(args.file)
        check_output(args.out)
        check_output_dir(args.out, "--out")
        from sao.models.gguf_import import import_gguf  # torch loads only after the checks

        imported = import_gguf(args.file, args.out, args.dtype)
    except GGUFImportError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    template = "its chat template" if imported.has_chat_template else "no chat template"
    print(
        f"{prog}: {imported.architecture}, {imported.parameters / 1e6:.1f}M parameters, "
        f"vocabulary {imported.vocab_size}, {imported.dtype}, {template}; "
        f"logits equal the GGUF load's (max gap {imported.max_logit_gap:.2g}); "
        f"written to {imported.out}",
        file=sys.stderr,
    )
    return 0


def _train(args: argparse.Namespace, prog: str) -> int:
    if args.quick:
        from sao.runtime.quick import QUICK_OVERRIDES

        # Over the defaults and any --config file, under --set and the flags below.
        args.overrides = [*QUICK_OVERRIDES, *args.overrides]
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
        from sao.runtime.launch import FixedFlags, run_train_command

        fixed = FixedFlags(args.preset, args.env, args.config_path, args.out)
        overrides = [*args.overrides, *extra]
        return run_train_command(None, resume=args.resume, overrides=overrides, fixed=fixed)
    config = _config_from(args, prog, extra)
    check_trainable(config)
    check_output_dir(config.run_dir(), "--out" if args.out else "train.out")
    _warn_of_tiny_rates(config, config.model.path or config.model.warm_start_from, prog)
    from sao.runtime.launch import run_train_command  # torch loads only after every check passed

    return run_train_command(config)


def _warn_of_tiny_rates(config: SAOConfig, model: str | None, prog: str) -> None:
    line = learning_rate_warning(config, model)
    if line:
        print(f"{prog}: warning: {line}", file=sys.stderr)


def _refuse_with(args: argparse.Namespace, flag: str, why: str) -> None:
    """Stop if a flag that `flag` cannot honour was given (rather than ignore it)."""
    given = [
        name
        for name, value in (
            ("--preset", args.preset),
            ("--env", args.env),
            ("--config", args.config_path),
        )
        if value
    ]
    if given:
        raise ConfigError(
            f"{flag}: {why}; {' and '.join(given)} cannot change it (--set can override fields)"
        )


if __name__ == "__main__":
    sys.exit(main())
