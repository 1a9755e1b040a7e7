"""The store's records: its SQLite schema, the row types it returns, and the errors it raises.

`sao.serve.store.Store` reads and writes them; see its docstring for what each table means.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    api_key_id TEXT NOT NULL,
    parent_id TEXT,
    context_hash TEXT NOT NULL,
    messages TEXT NOT NULL,
    content TEXT NOT NULL,
    finish_reason TEXT NOT NULL,
    trajectory TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS completions_context ON completions (context_hash);
CREATE TABLE IF NOT EXISTS feedback (
    completion_id TEXT PRIMARY KEY REFERENCES completions (id),
    reward REAL NOT NULL,
    received REAL NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    checkpoint INTEGER
);
CREATE INDEX IF NOT EXISTS feedback_state ON feedback (state, seq);
CREATE TABLE IF NOT EXISTS episodes (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    tip TEXT NOT NULL,
    trajectories INTEGER NOT NULL DEFAULT 1,
    state TEXT NOT NULL DEFAULT 'open'
);
CREATE INDEX IF NOT EXISTS episodes_state ON episodes (state, updated);
CREATE TABLE IF NOT EXISTS checkpoints (
    seq INTEGER PRIMARY KEY,
    version INTEGER NOT NULL,
    path TEXT NOT NULL,
    created REAL NOT NULL,
    metrics TEXT NOT NULL
);
"""

# Columns added to `completions` after its first release: a database from before gains them.
COMPLETION_COLUMNS = {
    "episode_id": "TEXT",
    "kind": "TEXT NOT NULL DEFAULT 'new'",
    "tool_calls": "INTEGER NOT NULL DEFAULT 0",
    "malformed": "INTEGER NOT NULL DEFAULT 0",
    "message": "TEXT",
}
# Columns added to `feedback` after its first release.
FEEDBACK_COLUMNS = {"error": "TEXT"}
# The columns `completion_from_row` reads, in its order.
COMPLETION_FIELDS = (
    "id, parent_id, context_hash, messages, content, finish_reason, trajectory, "
    "episode_id, kind, tool_calls, malformed, message"
)

PENDING, TRAINED, DROPPED = "pending", "trained", "dropped"
OPEN, REWARDED = "open", "rewarded"
ENV_ERROR = "env_error"
"""A feedback row (and its episode) reporting that a tool or the environment failed: recorded with
its error, never trained."""
NEW, CONTINUED, RESTARTED = "new", "continued", "restarted"


class UnknownCompletion(KeyError):
    """Feedback names a completion id the store has never served."""


class DuplicateFeedback(ValueError):
    """A second reward (or error report) for a completion that already has one."""


class UnknownEpisode(KeyError):
    """Feedback names an episode id the store has never seen."""


class EpisodeClosed(ValueError):
    """The episode was rewarded, dropped or reported failed already; `state` says which."""

    def __init__(self, episode_id: str, state: str) -> None:
        super().__init__(episode_id)
        self.episode_id = episode_id
        self.state = state


class CompletionInEpisode(ValueError):
    """Feedback by completion id for a completion of an episode (rewards go to the episode)."""

    def __init__(self, completion_id: str, episode_id: str) -> None:
        super().__init__(completion_id)
        self.episode_id = episode_id


@dataclass(frozen=True)
class StoredCompletion:
    """A served completion as the store holds it."""

    id: str
    parent_id: str | None
    context_hash: str
    messages: list[dict[str, Any]]
    content: str
    finish_reason: str
    trajectory: dict[str, Any]
    episode_id: str | None = None
    kind: str = NEW
    tool_calls: int = 0
    malformed: bool = False
    message: dict[str, Any] | None = None


@dataclass(frozen=True)
class Episode:
    """An episode as the store holds it: its state and newest completion."""

    id: str
    state: str
    tip: str
    trajectories: int
    updated: float


@dataclass(frozen=True)
class Checkpoint:
    """The newest checkpoint row."""

    seq: int
    version: int
    path: Path
    metrics: dict[str, float]


def completion_from_row(row: tuple) -> StoredCompletion:
    return StoredCompletion(
        id=row[0],
        parent_id=row[1],
        context_hash=row[2],
        messages=json.loads(row[3]),
        content=row[4],
        finish_reason=row[5],
        trajectory=json.loads(row[6]),
        episode_id=row[7],
        kind=row[8],
        tool_calls=row[9],
        malformed=bool(row[10]),
        message=None if row[11] is None else json.loads(row[11]),
    )
