"""The service's durable record: every completion, every feedback, every checkpoint, in SQLite (WAL).

Three tables:

    completions   one row per served completion: the request's messages, the reply, and the whole
                  trajectory so far (token ids, action mask, rollout log-probs, versions, turn
                  spans), written before the response is returned
    feedback      one row per accepted reward, written before the 200; its `state` moves from
                  `pending` to `trained` (or `dropped`, when a staleness limit is set) only in the
                  transaction that records the checkpoint holding that training
    checkpoints   one row per learner checkpoint: its sequence number, policy version and file

A kill at any moment therefore leaves: completions and feedback that were acknowledged, and a
latest checkpoint whose training is exactly the feedback marked `trained`. Feedback trained after
that checkpoint is still `pending` and is trained again from the checkpoint's weights, so in the
weights that survive, every accepted reward is trained once.

Every call opens its own short transaction on one connection guarded by a lock, so the HTTP
handlers (a thread pool) and the learner thread can share the store.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sao.trajectory import Trajectory

_SCHEMA = """
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
CREATE TABLE IF NOT EXISTS checkpoints (
    seq INTEGER PRIMARY KEY,
    version INTEGER NOT NULL,
    path TEXT NOT NULL,
    created REAL NOT NULL,
    metrics TEXT NOT NULL
);
"""

PENDING, TRAINED, DROPPED = "pending", "trained", "dropped"


class UnknownCompletion(KeyError):
    """Feedback names a completion id the store has never served."""


class DuplicateFeedback(ValueError):
    """A second reward for a completion that already has one."""


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


@dataclass(frozen=True)
class Checkpoint:
    """The newest checkpoint row."""

    seq: int
    version: int
    path: Path
    metrics: dict[str, float]


class Store:
    """SQLite in WAL mode with `synchronous=FULL`: a commit is on disk when the call returns."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ completions
    def add_completion(self, completion: StoredCompletion, api_key_id: str) -> None:
        """Persist one served completion (committed before this returns)."""
        row = (
            completion.id,
            time.time(),
            api_key_id,
            completion.parent_id,
            completion.context_hash,
            json.dumps(completion.messages),
            completion.content,
            completion.finish_reason,
            json.dumps(completion.trajectory),
        )
        with self._lock:
            self._db.execute("INSERT INTO completions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)

    def completion_by_context(self, context_hash: str) -> StoredCompletion | None:
        """The newest completion whose conversation (messages + reply) hashes to `context_hash`."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, parent_id, context_hash, messages, content, finish_reason, trajectory "
                "FROM completions WHERE context_hash = ? ORDER BY created DESC LIMIT 1",
                (context_hash,),
            ).fetchone()
        return None if row is None else _completion(row)

    # ------------------------------------------------------------------ feedback
    def add_feedback(self, completion_id: str, reward: float) -> None:
        """Accept a reward (committed before this returns).

        Raises:
            UnknownCompletion: no completion has this id.
            DuplicateFeedback: the completion already has a reward.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                known = self._db.execute(
                    "SELECT 1 FROM completions WHERE id = ?", (completion_id,)
                ).fetchone()
                if known is None:
                    raise UnknownCompletion(completion_id)
                seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM feedback").fetchone()
                try:
                    self._db.execute(
                        "INSERT INTO feedback (completion_id, reward, received, seq) "
                        "VALUES (?, ?, ?, ?)",
                        (completion_id, float(reward), time.time(), seq[0]),
                    )
                except sqlite3.IntegrityError:
                    raise DuplicateFeedback(completion_id) from None
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def pending_count(self) -> int:
        with self._lock:
            return self._db.execute(
                "SELECT COUNT(*) FROM feedback WHERE state = ?", (PENDING,)
            ).fetchone()[0]

    def pending_batch(self, limit: int) -> list[tuple[str, Trajectory]]:
        """The oldest `limit` untrained rewards as `(completion id, trajectory with its reward)`."""
        with self._lock:
            rows = self._db.execute(
                "SELECT f.completion_id, f.reward, c.trajectory FROM feedback f "
                "JOIN completions c ON c.id = f.completion_id "
                "WHERE f.state = ? ORDER BY f.seq LIMIT ?",
                (PENDING, limit),
            ).fetchall()
        out = []
        for completion_id, reward, trajectory in rows:
            fields = json.loads(trajectory)
            fields["metadata"] = {**fields.get("metadata", {}), "completion_id": completion_id}
            out.append((completion_id, Trajectory.from_dict({**fields, "reward": reward})))
        return out

    def counts(self) -> dict[str, int]:
        """`completions`, `feedback` (accepted), `trained`, `dropped`, `pending`."""
        with self._lock:
            completions = self._db.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
            by_state = dict(
                self._db.execute("SELECT state, COUNT(*) FROM feedback GROUP BY state").fetchall()
            )
        return {
            "completions": completions,
            "feedback": sum(by_state.values()),
            "trained": by_state.get(TRAINED, 0),
            "dropped": by_state.get(DROPPED, 0),
            "pending": by_state.get(PENDING, 0),
        }

    # ------------------------------------------------------------------ checkpoints
    def record_checkpoint(
        self,
        seq: int,
        version: int,
        path: Path,
        trained_ids: list[str],
        dropped_ids: list[str],
        metrics: dict[str, float],
    ) -> None:
        """In one transaction: the checkpoint row and the feedback it trained (or dropped)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                    (seq, version, str(path), time.time(), json.dumps(_finite(metrics))),
                )
                for state, ids in ((TRAINED, trained_ids), (DROPPED, dropped_ids)):
                    self._db.executemany(
                        "UPDATE feedback SET state = ?, checkpoint = ? "
                        "WHERE completion_id = ? AND state = ?",
                        [(state, seq, i, PENDING) for i in ids],
                    )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def latest_checkpoint(self) -> Checkpoint | None:
        with self._lock:
            row = self._db.execute(
                "SELECT seq, version, path, metrics FROM checkpoints ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        if row is None:
            return None
        return Checkpoint(row[0], row[1], Path(row[2]), json.loads(row[3]))

    def checkpoint_paths(self) -> list[Path]:
        """Every recorded checkpoint file, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT path FROM checkpoints ORDER BY seq").fetchall()
        return [Path(r[0]) for r in rows]


def _completion(row: tuple) -> StoredCompletion:
    return StoredCompletion(
        id=row[0],
        parent_id=row[1],
        context_hash=row[2],
        messages=json.loads(row[3]),
        content=row[4],
        finish_reason=row[5],
        trajectory=json.loads(row[6]),
    )


def _finite(metrics: dict[str, float]) -> dict[str, float | None]:
    return {
        k: (v if isinstance(v, int | float) and v == v and abs(v) != float("inf") else None)
        for k, v in metrics.items()
    }
