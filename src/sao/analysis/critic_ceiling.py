"""`sao inspect critic-ceiling fitted|oracle|run`: how much of the return variance a critic can
explain on an environment, for one fixed policy, measured two ways, and a run's critic beside it.

- `fitted` (`sao.analysis.critic_fit`): the share between tasks (what a prompt-only critic
  explains), and a critic built as `sao train` builds it, fitted offline to many more
  trajectories than a run gives it: what *that* critic can learn;
- `oracle` (`sao.analysis.critic_oracle`): the best any critic could do, from the return variance
  left at probed prefixes (fresh endings sampled from each), with `--checkpoint` a run's own
  critic beside it;
- `run` (`sao.analysis.critic_run`): the oracle at every checkpoint a run kept, with that
  checkpoint's critic and the explained variance the run logged beside it.

    sao inspect critic-ceiling fitted --policy checkpoints/warm_start_calc --tasks 256 --samples 4
    sao inspect critic-ceiling oracle --policy checkpoints/warm_start_calc --trajectories 256
    sao inspect critic-ceiling run runs/calc_sao --trajectories 128
"""

from __future__ import annotations

import argparse
import importlib

MODES = {
    "fitted": ("critic_fit", "a critic fitted offline, and the share a prompt-only one explains"),
    "oracle": ("critic_oracle", "what a perfect critic explains, from probed prefixes"),
    "run": ("critic_run", "a run's critic beside the oracle's ceiling at each checkpoint"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    modes = parser.add_subparsers(dest="mode", metavar="MODE", required=True)
    for name, (module_name, summary) in MODES.items():
        module = importlib.import_module(f"sao.analysis.{module_name}")
        mode = modes.add_parser(
            name,
            help=summary,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(mode)


def run(args: argparse.Namespace) -> int:
    return importlib.import_module(f"sao.analysis.{MODES[args.mode][0]}").run(args)
