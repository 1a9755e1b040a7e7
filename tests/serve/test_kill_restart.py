"""Fault test: `kill -9` a real `sao serve` process while it learns, restart it on the same
database, and count the feedback accepted, trained and lost from the files."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
from serve_helpers import free_port, user

import sao

BATCH = 2
WARMUP = 1


def start_server(policy_dir: str, db: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    source = str(Path(sao.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("SAO_API_KEY", None)
    command = [
        sys.executable, "-m", "sao.cli", "serve", "--model", policy_dir, "--db", str(db),
        "--port", str(port), "--env", "style_stream", "--warmup-batches", str(WARMUP),
        "--set", f"train.batch_size={BATCH}", "--set", "rollout.max_new_tokens=8",
        "--set", "env.max_tokens=192",
    ]  # fmt: skip
    log = (db.parent / f"server-{port}.log").open("w")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, (db.parent / f"server-{port}.log").read_text()
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("server did not come up")


def rate_one(url: str, reward: float) -> str:
    """One completion and its reward; returns the id once the reward got its 200."""
    reply = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "tiny-policy", "messages": user()},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    completion_id = reply.json()["id"]
    response = httpx.post(
        f"{url}/v1/feedback", json={"id": completion_id, "reward": reward}, timeout=60
    )
    assert response.status_code == 200, response.text
    return completion_id


def feedback_rows(db: Path) -> dict[str, tuple[str, int | None]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT completion_id, state, checkpoint FROM feedback").fetchall()
    return {cid: (state, checkpoint) for cid, state, checkpoint in rows}


def checkpoints(db: Path) -> list[tuple[int, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT seq, version FROM checkpoints ORDER BY seq").fetchall()


def test_kill_9_loses_no_feedback_and_trains_none_twice(policy_dir, tmp_path):
    db = tmp_path / "serve.db"
    accepted: list[str] = []
    process, url = start_server(policy_dir, db)
    try:
        # Three batches' worth: the last reward starts a learner step, and the kill lands
        # while it trains or checkpoints.
        for k in range(3 * BATCH):
            accepted.append(rate_one(url, float(k % 2)))
        time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()

    rows = feedback_rows(db)
    lost = [cid for cid in accepted if cid not in rows]
    trained_before = sum(state == "trained" for state, _ in rows.values())
    assert lost == []
    assert trained_before % BATCH == 0

    process, url = start_server(policy_dir, db)
    try:
        status = httpx.get(f"{url}/v1/status").json()
        assert status["feedback"] == len(accepted)
        assert status["trained"] == trained_before
        seq_version = checkpoints(db)
        restored_version = seq_version[-1][1] if seq_version else 0
        assert status["policy_version"] == restored_version
        for k in range(2 * BATCH):
            accepted.append(rate_one(url, float(k % 2)))
        deadline = time.monotonic() + 120
        while status["trained"] < len(accepted) and time.monotonic() < deadline:
            time.sleep(0.1)
            status = httpx.get(f"{url}/v1/status").json()
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()

    rows = feedback_rows(db)
    trained = [cid for cid, (state, _) in rows.items() if state == "trained"]
    lost = [cid for cid in accepted if cid not in rows]
    print(
        f"\nkill -9 + restart: accepted {len(accepted)}, trained {len(trained)} "
        f"(before the kill: {trained_before}), lost {len(lost)}"
    )
    assert lost == [] and sorted(trained) == sorted(accepted)
    history = checkpoints(db)
    # Each recorded checkpoint trained exactly one batch, and the weights hold one actor update
    # per post-warm-up batch: feedback trained twice would show as a version ahead of its batches.
    per_checkpoint = [sum(c == seq for _, c in rows.values()) for seq, _ in history]
    assert per_checkpoint == [BATCH] * len(history)
    assert [version for _, version in history] == [max(0, seq - WARMUP) for seq, _ in history]
    assert status["policy_version"] == len(trained) // BATCH - WARMUP
