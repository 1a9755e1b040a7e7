"""The one reader of run directories, eval results and run groups for `sao inspect`.

A run directory's files are laid out by `sao.runtime.run_dir`; its logs are read with
`sao.plumbing.durable` (an unterminated last line, cut by a kill or still being written, is skipped). A
file an analysis needs and cannot read is an `InspectError` naming it, which `sao inspect` prints
as one line (exit 2). Nothing heavy is imported here, so the analyses of metrics start fast.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sao.plumbing.durable import read_jsonl

if TYPE_CHECKING:
    from sao.trajectory import Trajectory

T = TypeVar("T")


class InspectError(ValueError):
    """Input an analysis cannot use: a missing or unreadable file, a malformed argument."""


def _needed(path: Path, hint: str = "") -> Path:
    if not path.is_file():
        raise InspectError(f"{path}: no such file{hint}")
    return path


def metrics(run: Path) -> list[dict[str, Any]]:
    """The rows of `RUN/metrics.jsonl` (one per logged step, eval rows included)."""
    return read_jsonl(_needed(Path(run) / "metrics.jsonl"))


def summary(run: Path) -> dict[str, Any]:
    """`RUN/summary.json`, written when a run finishes."""
    path = _needed(Path(run) / "summary.json", " (is the run finished?)")
    return json.loads(path.read_text())


def trajectory_rows(run: Path) -> list[dict[str, Any]]:
    """The records of `RUN/trajectories.jsonl` as plain dicts, in the order they completed."""
    return read_jsonl(_needed(Path(run) / "trajectories.jsonl"))


def trajectories(run: Path) -> list[Trajectory]:
    """The same records as `Trajectory` objects (loads torch)."""
    from sao.runtime.run_dir import read_trajectories

    _needed(Path(run) / "trajectories.jsonl")
    return read_trajectories(Path(run))


def run_config(run: Path) -> dict[str, Any]:
    """`RUN/config.yaml` as written (not re-validated: a run made under older settings still
    reads)."""
    import yaml

    return yaml.safe_load(_needed(Path(run) / "config.yaml").read_text()) or {}


def eval_result(path: Path) -> dict[str, Any]:
    """One `sao eval --json` result."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InspectError(f"{path}: cannot read an eval result ({err})") from None


def latest(rows: Sequence[T], share: float) -> Sequence[T]:
    """The last `share` of `rows` (the latest episodes), at least one."""
    if not 0.0 < share <= 1.0:
        raise InspectError(f"--last: must be in (0, 1], got {share}")
    return rows[len(rows) - max(1, round(len(rows) * share)) :]


def groups(texts: Sequence[str], what: str) -> list[tuple[str, list[Path]]]:
    """`LABEL=PATH[,PATH...]` arguments as `(label, paths)`; `what` names a path in the error."""
    out = []
    for text in texts:
        label, sep, paths = text.partition("=")
        if not sep or not label or not paths:
            raise InspectError(f"expected LABEL={what}[,{what}...], got {text!r}")
        out.append((label, [Path(p) for p in paths.split(",")]))
    return out
