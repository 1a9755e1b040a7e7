"""Files that survive a kill at any moment: atomic writes, strict JSON, append-only JSONL.

- Whole files (`atomic_write_text`, `atomic_write_json`) go to a temporary file in the same
  directory, are fsynced, then renamed over the target: a reader sees the old file or the new
  one, never half of either.
- JSONL logs are append-only. A kill mid-append can leave a last line without its newline (a
  torn record). `open_jsonl_for_append` repairs such a file by truncating the torn tail before
  anything is appended, so a new record is never glued onto it; `read_jsonl` skips an
  unterminated last line (a writer may be in the middle of it).
- Every JSON the project writes is strict (RFC 8259): non-finite floats become `null`.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def finite_or_none(value: Any) -> Any:
    """`value` with every non-finite float (NaN, +-inf) replaced by None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def strict_dumps(value: Any, indent: int | None = None) -> str:
    """Strict JSON text of `value` (non-finite floats as null)."""
    return json.dumps(finite_or_none(value), indent=indent, allow_nan=False)


def fsync_dir(path: Path) -> None:
    """Make a rename inside directory `path` durable (a no-op where directories cannot be
    opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` all at once (temporary file, fsync, rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def atomic_write_json(path: Path, value: Any) -> None:
    """`atomic_write_text` of strict, indented JSON."""
    atomic_write_text(path, strict_dumps(value, indent=2) + "\n")


def repair_torn_tail(path: Path) -> int:
    """Truncate an unterminated last line of `path`; returns the number of bytes removed."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as handle:
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        # Scan back in blocks for the last newline; everything after it is the torn record.
        end, block = size, 1 << 16
        keep = 0
        while end > 0:
            start = max(0, end - block)
            handle.seek(start)
            chunk = handle.read(end - start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    removed = size - keep
    print(
        f"sao: {path}: removed a torn last line ({removed} bytes, cut by an earlier kill)",
        file=sys.stderr,
    )
    return removed


def open_jsonl_for_append(path: Path) -> IO[str]:
    """Open a JSONL log for appending, after repairing a torn last line."""
    repair_torn_tail(path)
    return path.open("a")


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSONL file; an unterminated last line is skipped (torn or in progress).

    A line that is not JSON anywhere else (a record glued onto a torn one by a writer that did
    not repair it) is skipped with a warning naming the file and line."""
    if not path.exists():
        return
    text = path.read_text()
    lines = text.split("\n")
    # `split` leaves "" after a final newline; anything else there is an unfinished record.
    for number, line in enumerate(lines[:-1], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            print(
                f"sao: warning: {path}:{number} is not a JSON record ({err.msg}); skipped",
                file=sys.stderr,
            )
            continue
        yield record


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All complete records of a JSONL file (see `iter_jsonl`)."""
    return list(iter_jsonl(path))


def rewrite_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """Atomically replace a JSONL file with `rows`."""
    atomic_write_text(path, "".join(strict_dumps(row) + "\n" for row in rows))
