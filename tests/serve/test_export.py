"""`sao export`: the served database's newest checkpoint becomes a policy directory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import torch

from sao.cli import main
from sao.models.policy import build_tiny_policy, load_policy
from sao.models.tokenizer import build_tokenizer
from sao.serve.store import Store


def _database_with_checkpoints(tmp_path: Path, weights: list[dict[str, torch.Tensor]]) -> Path:
    db = tmp_path / "serve.db"
    store = Store(db)
    for seq, policy in enumerate(weights, start=1):
        path = tmp_path / f"checkpoint_{seq:06d}.pt"
        torch.save({"learner": {"policy": policy}, "warmup_done": 2}, path)
        store.record_checkpoint(seq, seq * 3, path, [], [], {})
    store.close()
    return db


def test_export_writes_the_newest_recorded_policy(policy_dir: str, tmp_path: Path, capsys) -> None:
    base = build_tiny_policy(build_tokenizer(), seed=0).state_dict()
    older = {k: v + 0.5 for k, v in base.items()}
    newer = {k: v - 0.25 for k, v in base.items()}
    db = _database_with_checkpoints(tmp_path, [older, newer])
    out = tmp_path / "exported"

    assert main(["export", "--db", str(db), "--model", policy_dir, "--out", str(out)]) == 0

    assert f"policy version 6 written to {out}" in capsys.readouterr().err
    model, _ = load_policy(out)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, newer[name], rtol=0, atol=0)


def test_export_refuses_a_database_without_a_checkpoint(policy_dir: str, tmp_path: Path, capsys):
    db = tmp_path / "empty.db"
    Store(db).close()
    out = tmp_path / "exported"

    assert main(["export", "--db", str(db), "--model", policy_dir, "--out", str(out)]) == 2

    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"sao export: --db: {str(db)!r} has no checkpoint yet (nothing trained)"]
    assert not out.exists()


def test_export_refuses_weights_of_another_model(policy_dir: str, tmp_path: Path, capsys) -> None:
    base = build_tiny_policy(build_tokenizer(), seed=0).state_dict()
    db = _database_with_checkpoints(tmp_path, [{"lm_head.weight": base["lm_head.weight"]}])

    assert (
        main(["export", "--db", str(db), "--model", policy_dir, "--out", str(tmp_path / "x")]) == 2
    )

    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sao ")]
    assert err == [
        "sao export: --model: the checkpoint's weights do not fit this model "
        f"({len(base) - 1} missing and 0 unexpected weights, e.g. {sorted(set(base) - {'lm_head.weight'})[0]!r})"
    ]


def test_export_reads_the_database_without_writing_it(policy_dir: str, tmp_path: Path) -> None:
    base = build_tiny_policy(build_tokenizer(), seed=0).state_dict()
    db = _database_with_checkpoints(tmp_path, [base])
    before = db.read_bytes()

    assert (
        main(["export", "--db", str(db), "--model", policy_dir, "--out", str(tmp_path / "o")]) == 0
    )

    assert db.read_bytes() == before
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone() == (1,)
