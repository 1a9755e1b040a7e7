"""`code_repair` tasks: a template module, one seeded bug, and a test suite partly hidden.

A task's prompt states what the entry function should do and shows the buggy file:

    Fix the bug. clamp(x, lo, hi) returns x limited to lo..hi.
    1 def clamp(x, lo, hi):
    2     if x < lo:
    3         return hi
    ...

`meta` carries everything the environment and the teacher need (all JSON-able): the buggy source,
the entry function, the visible and hidden tests as `[args, expected]` pairs, the bug family, the
buggy line and the lines that fix it. At least one visible test fails on the buggy file, so the
`test` tool always shows the bug; `submit` runs visible and hidden tests together.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sao.envs.base import HashSplitTaskSource, Task, stable_id
from sao.envs.code_repair.bugs import (
    FAMILIES,
    MISSING_EDGE_CASE,
    behaviour,
    line_mutations,
    variables_of,
)
from sao.envs.code_repair.protocol import numbered
from sao.envs.code_repair.templates import TEMPLATES, Template

PROMPT_HEAD = "Fix the bug. "
NUM_TESTS = 8
NUM_VISIBLE = 3


@dataclass(frozen=True)
class Bug:
    """One seeded bug: the buggy file and how to undo it.

    Attributes:
        family: the bug family (see `sao.envs.code_repair.bugs.FAMILIES`).
        lines: the buggy file's lines.
        line: the 1-based line of the buggy file to replace.
        fix: the lines that, put in place of `line`, give back the correct module.
    """

    family: str
    lines: tuple[str, ...]
    line: int
    fix: tuple[str, ...]


def render(template: Template, rng: random.Random) -> tuple[str, list[str], dict[str, Any]]:
    """Draw names and constants; returns the statement, the correct lines and the choices."""
    for _ in range(50):
        names = {key: rng.choice(options) for key, options in template.names.items()}
        if len(set(names.values())) == len(names):
            break
    else:
        raise ValueError(f"template {template.key}: could not draw distinct names")
    consts = {key: rng.choice(options) for key, options in template.consts.items()}
    values = {**names, **consts}
    lines = [line.format(**values) for line in template.lines]
    return template.statement.format(**values), lines, {"names": names, "consts": consts}


def draw_calls(template: Template, consts: dict[str, int], rng: random.Random) -> list[tuple]:
    """The edge-case calls plus random ones, `NUM_TESTS` distinct argument tuples at most."""
    calls: list[tuple] = []
    fresh = (template.random_args(rng, consts) for _ in range(40))
    for args in itertools.chain(template.edge_args(consts), fresh):
        if args not in calls:
            calls.append(args)
        if len(calls) == NUM_TESTS:
            break
    return calls


def _bug_candidates(lines: Sequence[str], template: Template, family: str) -> list[Bug]:
    if family == MISSING_EDGE_CASE:
        if template.guard is None:
            return []
        first, second = template.guard
        kept = tuple(line for i, line in enumerate(lines) if i not in (first, second))
        return [Bug(family, kept, first + 1, (lines[first], lines[second], lines[second + 1]))]
    variables = variables_of(lines)
    return [
        Bug(family, (*lines[:i], mutant, *lines[i + 1 :]), i + 1, (line,))
        for i, line in enumerate(lines)
        for mutant in line_mutations(line, family, variables)
    ]


def seed_bug(
    lines: Sequence[str],
    template: Template,
    entry: str,
    calls: Sequence[tuple],
    expected: Sequence[tuple[str, Any]],
    rng: random.Random,
    families: Sequence[str] = FAMILIES,
) -> tuple[Bug, list[int]] | None:
    """Pick a family, then a bug of it that some call exposes; also returns the failing calls.

    Families are tried in random order, so each is about equally likely whatever its number of
    candidate edits. None when no candidate of any family changes the behaviour.
    """
    order = list(families)
    rng.shuffle(order)
    for family in order:
        candidates = _bug_candidates(lines, template, family)
        rng.shuffle(candidates)
        for bug in candidates:
            got = behaviour("\n".join(bug.lines) + "\n", entry, calls)
            if got is None:
                continue
            failing = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
            if failing:
                return bug, failing
    return None


def make_task(
    template: Template, rng: random.Random, families: Sequence[str] = FAMILIES
) -> Task | None:
    """One task from `template` with a bug of `families`, or None when this draw has none."""
    statement, lines, choices = render(template, rng)
    entry = choices["names"]["f"]
    solution = "\n".join(lines) + "\n"
    calls = draw_calls(template, choices["consts"], rng)
    results = behaviour(solution, entry, calls)
    if results is None:
        raise ValueError(f"template {template.key}: the correct module does not load")
    keep = [i for i, (status, _) in enumerate(results) if status == "ok"]
    calls = [calls[i] for i in keep]
    expected = [results[i] for i in keep]
    seeded = seed_bug(lines, template, entry, calls, expected, rng, families)
    if seeded is None or len(calls) < NUM_VISIBLE + 1:
        return None
    bug, failing = seeded
    shown = rng.choice(failing)
    others = [i for i in range(len(calls)) if i != shown]
    rng.shuffle(others)
    visible = sorted([shown, *others[: NUM_VISIBLE - 1]])
    tests = [[list(calls[i]), expected[i][1]] for i in range(len(calls))]
    prompt = f"{PROMPT_HEAD}{statement}\n{numbered(bug.lines)}\n"
    return Task(
        task_id=stable_id("code_repair", prompt),
        prompt=prompt,
        answer=solution,
        meta={
            "env": "code_repair",
            "template": template.key,
            "family": bug.family,
            "entry": entry,
            "source": "\n".join(bug.lines) + "\n",
            "bug_line": bug.line,
            "fix": list(bug.fix),
            "visible_tests": [tests[i] for i in visible],
            "hidden_tests": [tests[i] for i in range(len(tests)) if i not in visible],
        },
    )


class CodeRepairTaskSource(HashSplitTaskSource):
    """`code_repair` tasks over the chosen templates and bug families.

    Args:
        templates: template keys to draw from (default: all of `TEMPLATES`).
        families: bug families to allow (default: all of `FAMILIES`).
        test_fraction: share of the prompt space held out for `test`.
    """

    def __init__(
        self,
        templates: Sequence[str] | None = None,
        families: Sequence[str] | None = None,
        test_fraction: float = 0.1,
    ) -> None:
        super().__init__(test_fraction=test_fraction)
        known = {t.key: t for t in TEMPLATES}
        keys = list(known) if templates is None else list(templates)
        unknown = [k for k in keys if k not in known]
        if not keys or unknown:
            raise ValueError(
                f"templates: must be a non-empty subset of {sorted(known)}, got {keys}"
            )
        chosen = tuple(FAMILIES) if families is None else tuple(families)
        if not chosen or any(f not in FAMILIES for f in chosen):
            raise ValueError(f"families: must be a non-empty subset of {FAMILIES}, got {chosen}")
        if chosen == (MISSING_EDGE_CASE,):
            keys = [k for k in keys if known[k].guard is not None]
            if not keys:
                raise ValueError("families: missing_edge_case needs a template with a guard")
        self.templates = tuple(known[k] for k in keys)
        self.families = chosen

    def generate(self, rng: random.Random) -> Task:
        """Draw one task (either split) using `rng` only."""
        for _ in range(100):
            task = make_task(rng.choice(self.templates), rng, self.families)
            if task is not None:
                return task
        raise ValueError(
            f"families {self.families}: no bug found in 100 draws over templates "
            f"{[t.key for t in self.templates]}"
        )
