"""Flags and entry point of `sao inspect NAME ...` (registered in `sao.cli`): one subcommand per
analysis, each a module of `sao.analysis` with `add_arguments(parser)` and `run(args) -> int`.

Nothing heavy is imported here or at the top of those modules: the parser is built on every
`sao` call. Input an analysis cannot use (`InspectError`, or a `ConfigError` of the settings or
paths it checks) ends with one line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from types import ModuleType

from sao.analysis.runs import InspectError
from sao.config import ConfigError

COMMANDS: dict[str, tuple[str, str]] = {
    "windows": ("step_windows", "metrics averaged over step windows, pooled over runs"),
    "seeds": ("seed_table", "one row per preset over seeds: gain, endings, critic, staleness"),
    "pool": ("pool_evals", "`sao eval --json` results of several seeds pooled on the same tasks"),
    "time-ratios": ("time_ratios", "claim (h)'s time-to-accuracy ratios of runs, seed by seed"),
    "endings": ("endings", "how a run's episodes ended, and how many of each earned a reward"),
    "critic-windows": ("critic_windows", "the critic over the first and last steps of runs"),
    "style-phases": ("style_phases", "style_stream: each preference phase as it opened and closed"),
    "failed-tests": ("failed_tests", "code_repair: the command after a failed test, by turns left"),
    "edit-credit": ("edit_credit", "code_repair: GAE's credit for a replace, by its test"),
    "calc-failures": ("calc_failures", "calc: why episodes failed, by what their tokens show"),
    "critic-ceiling": ("critic_ceiling", "how much of the return variance a critic can explain"),
    "style-coverage": ("style_coverage", "style_stream: how often a policy samples each style"),
    "teacher-stats": ("teacher_stats", "an environment's scripted teacher: accuracy, length"),
    "retry-warm-start": ("retry_warm_start", "code_repair: a warm start from a retrying teacher"),
}


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"sao.analysis.{COMMANDS[name][0]}")


def add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    """One subparser per analysis, described by its module's docstring."""
    sub = parser.add_subparsers(dest="analysis", metavar="ANALYSIS", required=True)
    for name, (_, summary) in COMMANDS.items():
        module = _module(name)
        command = sub.add_parser(
            name,
            help=summary,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show the traceback of an error (also: SAO_DEBUG=1)",
        )
        module.add_arguments(command)


def run_inspect_command(args: argparse.Namespace) -> int:
    """Run the analysis `args.analysis` names; its bad input is one line on stderr, exit 2."""
    try:
        return _module(args.analysis).run(args)
    except (InspectError, ConfigError) as err:
        if getattr(args, "debug", False) or os.environ.get("SAO_DEBUG", "") not in ("", "0"):
            traceback.print_exc()
        print(f"sao inspect {args.analysis}: {err}", file=sys.stderr)
        return 2
