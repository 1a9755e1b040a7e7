"""Import directions between layers, read from the syntax tree of every module.

Environments describe tasks and rewards; they must not know how a run is scheduled or trained,
so nothing under `sao/envs/` imports `sao.runtime` or `sao.learner`. The algorithm's pure math
(`sao/core/`) imports nothing from the runtime either. Evaluation and the warm start are used by
the runtime, so they import nothing from it; no two top-level parts of `sao` import each other,
directly or through others; and every part sits on a floor (`FLOORS`, the README's layout) and
imports only from the floors below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def imported_modules(source: str, package: str) -> set[str]:
    """Every absolute module `source` imports, at any depth (inside functions and `if` blocks
    too), with relative imports resolved against `package`, the file's own package."""
    parts = package.split(".")
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def is_within(module: str, packages: tuple[str, ...]) -> bool:
    """Whether `module` is one of `packages` or inside one (whole names: `sao.runtimes` is not
    inside `sao.runtime`)."""
    return any(module == p or module.startswith(f"{p}.") for p in packages)


def python_files(layer: str) -> list[Path]:
    """The files of `src/<layer>`: a package's, at any depth, or the one module it names."""
    root = SRC / layer
    return sorted(root.rglob("*.py")) if root.is_dir() else [root]


def violations(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    """`file: module` for every import of a forbidden package by a file under `src/<layer>`."""
    found = []
    for path in python_files(layer):
        package = ".".join(path.relative_to(SRC).parts[:-1])
        for module in sorted(imported_modules(path.read_text(encoding="utf-8"), package)):
            if is_within(module, forbidden):
                found.append(f"{path.relative_to(SRC)}: {module}")
    return found


def part_imports() -> dict[str, set[str]]:
    """Which top-level parts of `sao` (`sao.runtime`, `sao.evaluation`, ...) each part imports."""
    layers = {
        f"sao.{p.stem}": str(p.relative_to(SRC))
        for p in (SRC / "sao").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    edges = {}
    for part, layer in layers.items():
        imported: set[str] = set()
        for path in python_files(layer):
            package = ".".join(path.relative_to(SRC).parts[:-1])
            imported |= imported_modules(path.read_text(encoding="utf-8"), package)
        edges[part] = {
            other
            for other in layers
            if other != part and any(is_within(m, (other,)) for m in imported)
        }
    return edges


def cycle_through(edges: dict[str, set[str]], start: str) -> list[str] | None:
    """A path of imports from `start` back to itself, if there is one."""
    stack = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(edges[node]):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_environments_import_neither_runtime_nor_learner() -> None:
    assert list((SRC / "sao" / "envs").rglob("*.py"))
    assert violations("sao/envs", ("sao.runtime", "sao.learner")) == []


def test_core_imports_nothing_from_the_runtime() -> None:
    assert list((SRC / "sao" / "core").rglob("*.py"))
    assert violations("sao/core", ("sao.runtime",)) == []


def test_evaluation_and_the_warm_start_import_nothing_from_the_runtime() -> None:
    for layer in ("sao/evaluation", "sao/warmstart"):
        assert (SRC / layer).exists()
        assert violations(layer, ("sao.runtime",)) == []


def test_no_two_parts_of_the_package_import_each_other() -> None:
    edges = part_imports()
    assert {"sao.runtime", "sao.evaluation", "sao.warmstart"} <= edges.keys()
    assert "sao.evaluation" in edges["sao.runtime"]  # the check sees real edges
    assert [cycle_through(edges, part) for part in sorted(edges)] == [None] * len(edges)


def test_the_cycle_check_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycle_through(edges, "a") == ["a", "b", "c", "a"]
    assert cycle_through(edges, "d") is None


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import sao.runtime.plots\n", "sao.runtime.plots"),
        ("def f():\n    from sao.runtime.plots import plot_metrics\n", "sao.runtime.plots"),
        ("from sao import runtime\n", "sao.runtime"),
        ("from ...runtime import plots\n", "sao.runtime.plots"),
        ("from ... import learner\n", "sao.learner"),
        ("if True:\n    import sao.learner.step as s\n", "sao.learner.step"),
    ],
)
def test_the_check_sees_every_form_of_import(source: str, module: str) -> None:
    seen = imported_modules(source, "sao.envs.calc")
    assert module in seen
    assert is_within(module, ("sao.runtime", "sao.learner"))


def test_names_are_matched_whole() -> None:
    assert not is_within("sao.runtimes", ("sao.runtime",))
    assert imported_modules("from .tasks import CalcTaskSource\n", "sao.envs.calc") == {
        "sao.envs.calc.tasks",
        "sao.envs.calc.tasks.CalcTaskSource",
    }


def test_runtime_protocols_stand_alone_and_backends_never_import_their_factory() -> None:
    # The interfaces import no implementation; implementations import the interfaces, not the
    # factory that picks them (which imports them), so the runtime has no import circle.
    assert violations("sao/runtime/protocols.py", ("sao.runtime",)) == []
    for layer in ("sao/runtime/local_backend.py", "sao/runtime/ray_backend.py"):
        assert violations(layer, ("sao.runtime.backends",)) == []


# The package's floors, lowest first: a part imports only parts on floors below its own.
FLOORS = (
    ("sao.plumbing", "sao.formats", "sao.presets", "sao.trajectory", "sao.tools", "sao.core"),
    ("sao.config",),
    ("sao.models", "sao.envs"),
    ("sao.learner", "sao.preflight"),
    ("sao.rollout",),
    ("sao.warmstart",),
    ("sao.evaluation",),
    ("sao.runtime",),
    ("sao.serve", "sao.reproduce"),
    ("sao.analysis",),
    ("sao.cli",),
)


def upward_imports(edges: dict[str, set[str]], floors: tuple[tuple[str, ...], ...]) -> list[str]:
    """`part -> other` for every import of a part on the same floor or a higher one."""
    floor_of = {part: level for level, parts in enumerate(floors) for part in parts}
    return sorted(
        f"{part} -> {other}"
        for part, others in edges.items()
        for other in others
        if floor_of[other] >= floor_of[part]
    )


def test_every_part_of_the_package_has_a_floor() -> None:
    assert set(part_imports()) == {part for parts in FLOORS for part in parts}


def test_every_import_runs_down_the_floors() -> None:
    assert upward_imports(part_imports(), FLOORS) == []


def test_the_floor_check_finds_an_upward_import() -> None:
    edges = {"a": {"b"}, "b": set(), "c": {"c2"}, "c2": set()}
    assert upward_imports(edges, (("a",), ("b",), ("c", "c2"))) == ["a -> b", "c -> c2"]
