"""The service's durable record: every completion, every feedback, every checkpoint, in SQLite (WAL).

Three tables:

    completions   one row per served completion: the request's messages, the reply, and the whole
                  trajectory so far (token ids, action mask, rollout log-probs, versions, turn
                  spans), written before the response is returned
    feedback      one row per accepted reward, written before the 200; its `state` moves from
                  `pending` to `trained` (or `dropped`, when a staleness limit is set) only in the
                  transaction that records the checkpoint holding that training. A client that
                  reports a tool or environment failure instead of a reward gets a row in state
                  `env_error` with its `error`: recorded, never trained
    checkpoints   one row per learner checkpoint: its sequence number, policy version and file

An episode (`X-Episode-Id`) is a row of `episodes`: its newest completion (`tip`, whose
trajectory holds the episode's whole token sequence), how many trajectories it started (a call
whose history does not extend the tip starts another), and its state: `open`, `rewarded` (one
feedback row, on the tip), `dropped` (no reward within the episode timeout), or `env_error` (its
tool or environment failed: never trained). Completions of an episode take rewards only through
it, so its tokens train once.

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
from pathlib import Path

from sao.serve.records import (
    COMPLETION_COLUMNS,
    COMPLETION_FIELDS,
    CONTINUED,
    DROPPED,
    ENV_ERROR,
    FEEDBACK_COLUMNS,
    NEW,
    OPEN,
    PENDING,
    RESTARTED,
    REWARDED,
    SCHEMA,
    TRAINED,
    Checkpoint,
    CompletionInEpisode,
    DuplicateFeedback,
    Episode,
    EpisodeClosed,
    StoredCompletion,
    UnknownCompletion,
    UnknownEpisode,
    completion_from_row,
)
from sao.trajectory import Trajectory

__all__ = [
    "CONTINUED",
    "DROPPED",
    "ENV_ERROR",
    "NEW",
    "OPEN",
    "PENDING",
    "RESTARTED",
    "REWARDED",
    "TRAINED",
    "Checkpoint",
    "CompletionInEpisode",
    "DuplicateFeedback",
    "Episode",
    "EpisodeClosed",
    "Store",
    "StoredCompletion",
    "UnknownCompletion",
    "UnknownEpisode",
]


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
        self._db.executescript(SCHEMA)
        for table, columns in (("completions", COMPLETION_COLUMNS), ("feedback", FEEDBACK_COLUMNS)):
            have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for column, kind in columns.items():
                if column not in have:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ completions
    def add_completion(self, completion: StoredCompletion, api_key_id: str) -> None:
        """Persist one served completion, and move its episode's tip to it (one transaction,
        committed before this returns)."""
        now = time.time()
        row = (
            completion.id,
            now,
            api_key_id,
            completion.parent_id,
            completion.context_hash,
            json.dumps(completion.messages),
            completion.content,
            completion.finish_reason,
            json.dumps(completion.trajectory),
            completion.episode_id,
            completion.kind,
            completion.tool_calls,
            int(completion.malformed),
            None if completion.message is None else json.dumps(completion.message),
        )
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT INTO completions (id, created, api_key_id, parent_id, context_hash, "
                    "messages, content, finish_reason, trajectory, episode_id, kind, tool_calls, "
                    "malformed, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
                if completion.episode_id is not None:
                    self._db.execute(
                        "INSERT INTO episodes (id, created, updated, tip) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (id) DO UPDATE SET updated = excluded.updated, "
                        "tip = excluded.tip, trajectories = trajectories + ? WHERE state = ?",
                        (completion.episode_id, now, now, completion.id,
                         int(completion.kind == RESTARTED), OPEN),
                    )  # fmt: skip
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def completion_by_context(self, context_hash: str) -> StoredCompletion | None:
        """The newest completion outside any episode whose conversation (messages + reply)
        hashes to `context_hash`."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {COMPLETION_FIELDS} FROM completions WHERE context_hash = ? "
                "AND episode_id IS NULL ORDER BY created DESC LIMIT 1",
                (context_hash,),
            ).fetchone()
        return None if row is None else completion_from_row(row)

    def completion(self, completion_id: str) -> StoredCompletion | None:
        """The completion with this id."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {COMPLETION_FIELDS} FROM completions WHERE id = ?", (completion_id,)
            ).fetchone()
        return None if row is None else completion_from_row(row)

    # ------------------------------------------------------------------ episodes
    def episode(self, episode_id: str) -> Episode | None:
        """The episode with this id, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, state, tip, trajectories, updated FROM episodes WHERE id = ?",
                (episode_id,),
            ).fetchone()
        return None if row is None else Episode(*row)

    def drop_idle_episodes(self, idle_before: float) -> int:
        """Drop every open episode whose last call was before `idle_before`; how many."""
        with self._lock:
            return self._db.execute(
                "UPDATE episodes SET state = ? WHERE state = ? AND updated < ?",
                (DROPPED, OPEN, idle_before),
            ).rowcount

    def add_episode_feedback(
        self, episode_id: str, reward: float, idle_before: float, error: str | None = None
    ) -> str:
        """Accept the episode's reward on its newest completion (committed before this returns);
        returns that completion's id. An episode idle since before `idle_before` is dropped first.
        With `error` (its tool or environment failed) the episode ends in state `env_error`
        instead, its error recorded and nothing trained.

        Raises:
            UnknownEpisode: no completion was served in this episode.
            EpisodeClosed: the episode was rewarded or dropped already.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT state, tip, updated FROM episodes WHERE id = ?", (episode_id,)
                ).fetchone()
                if row is None:
                    raise UnknownEpisode(episode_id)
                state, tip, updated = row
                if state == OPEN and updated < idle_before:
                    state = DROPPED
                if state == OPEN:
                    self._insert_feedback(tip, reward, error)
                ended = (REWARDED if error is None else ENV_ERROR) if state == OPEN else state
                self._db.execute("UPDATE episodes SET state = ? WHERE id = ?", (ended, episode_id))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        if state != OPEN:
            raise EpisodeClosed(episode_id, state)
        return tip

    # ------------------------------------------------------------------ feedback
    def add_feedback(self, completion_id: str, reward: float, error: str | None = None) -> None:
        """Accept a reward (committed before this returns); with `error`, record that the
        completion's tool or environment failed instead (never trained).

        Raises:
            UnknownCompletion: no completion has this id.
            CompletionInEpisode: the completion belongs to an episode (reward the episode).
            DuplicateFeedback: the completion already has a reward.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                known = self._db.execute(
                    "SELECT episode_id FROM completions WHERE id = ?", (completion_id,)
                ).fetchone()
                if known is None:
                    raise UnknownCompletion(completion_id)
                if known[0] is not None:
                    raise CompletionInEpisode(completion_id, known[0])
                self._insert_feedback(completion_id, reward, error)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _insert_feedback(self, completion_id: str, reward: float, error: str | None) -> None:
        seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM feedback").fetchone()
        state = PENDING if error is None else ENV_ERROR
        try:
            self._db.execute(
                "INSERT INTO feedback (completion_id, reward, received, seq, state, error) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (completion_id, float(reward), time.time(), seq[0], state, error),
            )
        except sqlite3.IntegrityError:
            raise DuplicateFeedback(completion_id) from None

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
        """Every counter `/v1/status` and `/metrics` report (see docs/serving.md)."""
        with self._lock:
            completions, continued, restarted, calls, malformed = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(kind = ?), 0), COALESCE(SUM(kind = ?), 0), "
                "COALESCE(SUM(tool_calls), 0), COALESCE(SUM(malformed), 0) FROM completions",
                (CONTINUED, RESTARTED),
            ).fetchone()
            by_state = dict(
                self._db.execute("SELECT state, COUNT(*) FROM feedback GROUP BY state").fetchall()
            )
            episodes = dict(
                self._db.execute("SELECT state, COUNT(*) FROM episodes GROUP BY state").fetchall()
            )
            abandoned = self._db.execute(
                "SELECT COALESCE(SUM(trajectories - 1), 0) FROM episodes"
            ).fetchone()[0]
        return {
            "completions": completions,
            "feedback": sum(by_state.values()) - by_state.get(ENV_ERROR, 0),
            "trained": by_state.get(TRAINED, 0),
            "dropped": by_state.get(DROPPED, 0),
            "pending": by_state.get(PENDING, 0),
            "continued": continued,
            "restarted": restarted,
            "tool_calls": calls,
            "malformed_tool_calls": malformed,
            "episodes_started": sum(episodes.values()),
            "episodes_open": episodes.get(OPEN, 0),
            "episodes_rewarded": episodes.get(REWARDED, 0),
            "episodes_dropped": episodes.get(DROPPED, 0),
            "trajectories_abandoned": abandoned,
            "env_errors": by_state.get(ENV_ERROR, 0),
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


def _finite(metrics: dict[str, float]) -> dict[str, float | None]:
    return {
        k: (v if isinstance(v, int | float) and v == v and abs(v) != float("inf") else None)
        for k, v in metrics.items()
    }
