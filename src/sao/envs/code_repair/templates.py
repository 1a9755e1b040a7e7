"""The correct small modules that `code_repair` tasks break: one or two short functions each.

A template is Python source with `{placeholders}`: identifiers (drawn from `names`) and small
integer constants (drawn from `consts`), so one template yields many different files. Tests call
the entry function `{f}` on arguments from `random_args` (plus the fixed `edge_args`); the expected
values come from running the correct module. Templates use only `for` loops over short ranges or
lists (no `while`, no recursion), so every variant -- and every seeded bug -- terminates quickly.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Args = tuple
Consts = Mapping[str, int]


@dataclass(frozen=True)
class Template:
    """A correct module with placeholders.

    Attributes:
        key: a short stable name (recorded in task meta).
        statement: one sentence saying what the entry function does (placeholders allowed).
        lines: the module's lines, 4-space indented, with placeholders.
        names: identifier placeholder -> choices; `f` names the entry function.
        consts: constant placeholder -> choices.
        random_args: draws one argument tuple for the entry function.
        edge_args: argument tuples always tested (empty lists, bounds ...).
        guard: 0-based indices of an edge-case guard (`if ...:` and its `return`), which the
            `missing_edge_case` bug family deletes; None when the template has none.
    """

    key: str
    statement: str
    lines: tuple[str, ...]
    names: Mapping[str, tuple[str, ...]]
    random_args: Callable[[random.Random, Consts], Args]
    consts: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    edge_args: Callable[[Consts], list[Args]] = lambda c: []
    guard: tuple[int, int] | None = None


def _ints(rng: random.Random, n_max: int, lo: int = -5, hi: int = 9) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(1, n_max))]


def _clamp_args(rng: random.Random, c: Consts) -> Args:
    lo = rng.randint(-3, 3)
    hi = lo + rng.randint(1, 5)
    return (rng.randint(lo - 3, hi + 3), lo, hi)


def _range_args(rng: random.Random, c: Consts) -> Args:
    lo = rng.randint(0, 4)
    return (_ints(rng, 5, 0, 9), lo, lo + rng.randint(0, 4))


_XS = ("xs", "nums", "items", "vals")
_X = ("x", "v", "y")
_ACC = ("s", "acc", "total")
_COUNT = ("n", "count", "k")

TEMPLATES: tuple[Template, ...] = (
    Template(
        key="clamp",
        statement="{f}({x}, {lo}, {hi}) returns {x} limited to {lo}..{hi}.",
        lines=(
            "def {f}({x}, {lo}, {hi}):",
            "    if {x} < {lo}:",
            "        return {lo}",
            "    if {x} > {hi}:",
            "        return {hi}",
            "    return {x}",
        ),
        names={
            "f": ("clamp", "limit", "bound"),
            "x": _X,
            "lo": ("lo", "low"),
            "hi": ("hi", "high"),
        },
        random_args=_clamp_args,
        edge_args=lambda c: [(0, 0, 3), (3, 0, 3), (-1, 0, 3), (4, 0, 3)],
    ),
    Template(
        key="scaled_sum",
        statement="{f}({xs}) returns {k} times the sum of {xs}.",
        lines=(
            "def {f}({xs}):",
            "    {s} = 0",
            "    for {x} in {xs}:",
            "        {s} = {s} + {x} * {k}",
            "    return {s}",
        ),
        names={"f": ("scaled_sum", "weigh", "times_sum"), "xs": _XS, "s": _ACC, "x": _X},
        consts={"k": (2, 3, 4, 5, 6, 7, 8, 9)},
        random_args=lambda rng, c: (_ints(rng, 4),),
        edge_args=lambda c: [([],), ([1],)],
    ),
    Template(
        key="count_above",
        statement="{f}({xs}, {t}) counts the items of {xs} greater than {t}.",
        lines=(
            "def {f}({xs}, {t}):",
            "    {n} = 0",
            "    for {x} in {xs}:",
            "        if {x} > {t}:",
            "            {n} = {n} + 1",
            "    return {n}",
        ),
        names={
            "f": ("count_above", "num_over", "above"),
            "xs": _XS,
            "t": ("t", "limit"),
            "n": _COUNT,
            "x": _X,
        },
        random_args=lambda rng, c: (_ints(rng, 5, 0, 9), rng.randint(0, 9)),
        edge_args=lambda c: [([], 3), ([3, 4], 3)],
    ),
    Template(
        key="largest",
        statement="{f}({xs}) returns the largest item of {xs}, or {d} if it is empty.",
        lines=(
            "def {f}({xs}):",
            "    if not {xs}:",
            "        return {d}",
            "    {m} = {xs}[0]",
            "    for {x} in {xs}:",
            "        if {x} > {m}:",
            "            {m} = {x}",
            "    return {m}",
        ),
        names={"f": ("largest", "top", "biggest"), "xs": _XS, "m": ("m", "best"), "x": _X},
        consts={"d": (0, 1, 9)},
        random_args=lambda rng, c: (
            _ints(rng, 5, -20, -10) if rng.random() < 0.3 else _ints(rng, 5),
        ),
        edge_args=lambda c: [([],), ([-7, -8],)],
        guard=(1, 2),
    ),
    Template(
        key="smallest",
        statement="{f}({xs}) returns the smallest item of {xs}, or {d} if it is empty.",
        lines=(
            "def {f}({xs}):",
            "    if len({xs}) == 0:",
            "        return {d}",
            "    {m} = {xs}[0]",
            "    for {x} in {xs}:",
            "        if {x} < {m}:",
            "            {m} = {x}",
            "    return {m}",
        ),
        names={"f": ("smallest", "least", "lowest"), "xs": _XS, "m": ("m", "low"), "x": _X},
        consts={"d": (0, 1, 9)},
        random_args=lambda rng, c: (
            _ints(rng, 5, 10, 30) if rng.random() < 0.3 else _ints(rng, 5),
        ),
        edge_args=lambda c: [([],), ([17, 12],)],
        guard=(1, 2),
    ),
    Template(
        key="sum_to",
        statement="{f}({n}) returns 1 + 2 + ... + {n}.",
        lines=(
            "def {f}({n}):",
            "    {s} = 0",
            "    for {i} in range(1, {n} + 1):",
            "        {s} = {s} + {i}",
            "    return {s}",
        ),
        names={"f": ("sum_to", "triangle", "upto"), "n": ("n", "m"), "s": _ACC, "i": ("i", "j")},
        random_args=lambda rng, c: (rng.randint(2, 9),),
        edge_args=lambda c: [(0,), (1,)],
    ),
    Template(
        key="product_to",
        statement="{f}({n}) returns 1 * 2 * ... * {n}.",
        lines=(
            "def {f}({n}):",
            "    {p} = 1",
            "    for {i} in range(2, {n} + 1):",
            "        {p} = {p} * {i}",
            "    return {p}",
        ),
        names={
            "f": ("factorial", "fact", "prod_to"),
            "n": ("n", "m"),
            "p": ("p", "r"),
            "i": ("i", "j"),
        },
        random_args=lambda rng, c: (rng.randint(3, 7),),
        edge_args=lambda c: [(0,), (1,), (2,)],
    ),
    Template(
        key="power_plus",
        statement="{f}({x}) returns {x} to the power {k}, plus {c}.",
        lines=(
            "def {g}({b}, {e}):",
            "    {r} = 1",
            "    for _ in range({e}):",
            "        {r} = {r} * {b}",
            "    return {r}",
            "",
            "def {f}({x}):",
            "    return {g}({x}, {k}) + {c}",
        ),
        names={
            "g": ("power", "pow_int"),
            "b": ("b", "base"),
            "e": ("e", "exp"),
            "r": ("r", "out"),
            "f": ("lift", "shape", "curve"),
            "x": _X,
        },
        consts={"k": (2, 3, 4), "c": (1, 2, 3, 4, 5, 6, 7, 8, 9)},
        random_args=lambda rng, c: (rng.randint(-3, 5),),
        edge_args=lambda c: [(0,), (1,), (2,)],
    ),
    Template(
        key="sign",
        statement="{f}({x}) returns {p} if {x} > 0, -{p} if {x} < 0, else 0.",
        lines=(
            "def {f}({x}):",
            "    if {x} > 0:",
            "        return {p}",
            "    if {x} < 0:",
            "        return -{p}",
            "    return 0",
        ),
        names={"f": ("sign", "side", "direction"), "x": _X},
        consts={"p": (1, 2, 3, 5, 7, 9)},
        random_args=lambda rng, c: (rng.randint(-9, 9),),
        edge_args=lambda c: [(0,), (1,), (-1,)],
    ),
    Template(
        key="count_in_range",
        statement="{f}({xs}, {lo}, {hi}) counts the items of {xs} in {lo}..{hi}.",
        lines=(
            "def {h}({x}, {lo}, {hi}):",
            "    return {lo} <= {x} and {x} <= {hi}",
            "",
            "def {f}({xs}, {lo}, {hi}):",
            "    {n} = 0",
            "    for {x} in {xs}:",
            "        if {h}({x}, {lo}, {hi}):",
            "            {n} = {n} + 1",
            "    return {n}",
        ),
        names={
            "h": ("inside", "within"),
            "f": ("count_in", "how_many"),
            "xs": _XS,
            "x": _X,
            "lo": ("lo", "low"),
            "hi": ("hi", "high"),
            "n": _COUNT,
        },
        random_args=_range_args,
        edge_args=lambda c: [([], 1, 5), ([1, 5, 6, 0], 1, 5)],
    ),
    Template(
        key="mean",
        statement="{f}({xs}) returns the sum of {xs} // its length, or 0 if it is empty.",
        lines=(
            "def {f}({xs}):",
            "    if not {xs}:",
            "        return 0",
            "    {s} = 0",
            "    for {x} in {xs}:",
            "        {s} = {s} + {x}",
            "    return {s} // len({xs})",
        ),
        names={"f": ("mean", "average", "avg"), "xs": _XS, "s": _ACC, "x": _X},
        random_args=lambda rng, c: (_ints(rng, 4, 0, 20),),
        edge_args=lambda c: [([],), ([7],)],
        guard=(1, 2),
    ),
    Template(
        key="count_multiples",
        statement="{f}({xs}) counts the items of {xs} divisible by {k}.",
        lines=(
            "def {f}({xs}):",
            "    {n} = 0",
            "    for {x} in {xs}:",
            "        if {x} % {k} == 0:",
            "            {n} = {n} + 1",
            "    return {n}",
        ),
        names={"f": ("multiples", "count_div", "divisible"), "xs": _XS, "n": _COUNT, "x": _X},
        consts={"k": (2, 3, 4, 5, 6, 7)},
        random_args=lambda rng, c: (_ints(rng, 5, 1, 30),),
        edge_args=lambda c: [([],), ([c["k"], c["k"] + 1],)],
    ),
    Template(
        key="find",
        statement="{f}({xs}, {t}) returns the first index of {t} in {xs}, or -1.",
        lines=(
            "def {f}({xs}, {t}):",
            "    for {i} in range(len({xs})):",
            "        if {xs}[{i}] == {t}:",
            "            return {i}",
            "    return -1",
        ),
        names={
            "f": ("find", "index_of", "locate"),
            "xs": _XS,
            "t": ("t", "target"),
            "i": ("i", "j"),
        },
        random_args=lambda rng, c: (_ints(rng, 5, 0, 5), rng.randint(0, 5)),
        edge_args=lambda c: [([], 1), ([2, 1, 1], 1), ([3, 4], 4)],
    ),
    Template(
        key="last",
        statement="{f}({xs}) returns the last item of {xs}, or {d} if it is empty.",
        lines=(
            "def {f}({xs}):",
            "    if len({xs}) == 0:",
            "        return {d}",
            "    return {xs}[len({xs}) - 1]",
        ),
        names={"f": ("last", "final", "tail"), "xs": _XS},
        consts={"d": (0, 1, 9)},
        random_args=lambda rng, c: (_ints(rng, 5),),
        edge_args=lambda c: [([],), ([4, 5],)],
        guard=(1, 2),
    ),
    Template(
        key="distance",
        statement="{f}({a}, {b}) returns the distance between {a} and {b}.",
        lines=(
            "def {f}({a}, {b}):",
            "    if {a} > {b}:",
            "        return {a} - {b}",
            "    return {b} - {a}",
        ),
        names={"f": ("distance", "gap", "dist"), "a": ("a", "p"), "b": ("b", "q")},
        random_args=lambda rng, c: (rng.randint(-9, 9), rng.randint(-9, 9)),
        edge_args=lambda c: [(2, 7), (7, 2), (3, 3)],
    ),
    Template(
        key="step",
        statement="{f}({n}) returns {n} // {k} if {k} divides {n}, else {n} * {c} + 1.",
        lines=(
            "def {f}({n}):",
            "    if {n} % {k} == 0:",
            "        return {n} // {k}",
            "    return {n} * {c} + 1",
        ),
        names={"f": ("step", "next_n", "hop"), "n": ("n", "m")},
        consts={"k": (2, 3, 4, 5), "c": (2, 3, 4, 5)},
        random_args=lambda rng, c: (rng.randint(1, 30),),
        edge_args=lambda c: [(c["k"],), (c["k"] + 1,), (2 * c["k"],)],
    ),
)
