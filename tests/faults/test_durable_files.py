"""Run files under torn writes: JSONL tails, checkpoints, pruning, strict JSON."""

from __future__ import annotations

import json
import math

import pytest
import torch

from sao.plumbing.durable import (
    atomic_write_json,
    open_jsonl_for_append,
    read_jsonl,
    strict_dumps,
)
from sao.runtime.checkpoints import (
    checkpoint_steps,
    load_latest_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)
from sao.runtime.record import RunRecord
from sao.runtime.run_dir import MetricsLogger, RunClock


def test_a_torn_last_line_is_cut_before_the_next_append(tmp_path, capsys):
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": 3, "trunc')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]  # the torn record is not read
    with open_jsonl_for_append(path) as handle:
        handle.write('{"a": 4}\n')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}, {"a": 4}]
    assert "torn last line" in capsys.readouterr().err


def test_a_torn_only_line_leaves_an_empty_log(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1')
    open_jsonl_for_append(path).close()
    assert path.read_text() == ""


def test_a_damaged_line_inside_a_log_is_skipped_and_named(tmp_path, capsys):
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"a": 2{"a": 3}\n{"a": 4}\n')
    assert read_jsonl(path) == [{"a": 1}, {"a": 4}]
    err = capsys.readouterr().err.strip()
    assert "log.jsonl:2 is not a JSON record" in err and "\n" not in err


def test_written_json_is_strict(tmp_path):
    text = strict_dumps({"x": math.nan, "y": [math.inf, 1.5]})
    assert json.loads(text, parse_constant=lambda name: pytest.fail(name)) == {
        "x": None,
        "y": [None, 1.5],
    }
    logger = MetricsLogger(tmp_path, tensorboard=False)
    logger.log(1, {"critic/vf_explained_var": math.nan})
    logger.close()
    assert read_jsonl(tmp_path / "metrics.jsonl") == [{"step": 1, "critic/vf_explained_var": None}]


def test_resumed_metrics_drop_the_rows_of_replayed_steps(tmp_path):
    logger = MetricsLogger(tmp_path, tensorboard=False)
    for step in range(5):
        logger.log(step, {"x": float(step)})
    logger.close()
    MetricsLogger(tmp_path, tensorboard=False, keep_through=2).close()
    assert [row["step"] for row in read_jsonl(tmp_path / "metrics.jsonl")] == [0, 1, 2]


def test_wall_time_sums_over_invocations(tmp_path):
    atomic_write_json(tmp_path / "sessions.json", {"sessions": [{"started": "x", "wall_s": 7.0}]})
    clock = RunClock(tmp_path)
    assert 7.0 <= clock.total_s() < 60.0
    assert len(json.loads((tmp_path / "sessions.json").read_text())["sessions"]) == 2


def _state(step: int) -> dict:
    return {"version": step, "weights": torch.full((3,), float(step))}


def test_a_truncated_newest_checkpoint_falls_back_to_the_older_one(tmp_path, capsys):
    for step in (2, 4):
        save_checkpoint(tmp_path, step, _state(step), RunRecord(step=step), keep=5)
    newest = tmp_path / "checkpoints" / "step_4" / "learner.pt"
    newest.write_bytes(newest.read_bytes()[:40])
    state, record = load_latest_checkpoint(tmp_path)
    assert state["version"] == 2 and record.step == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "step_4" in err[0] and "falling back" in err[0]


def test_a_half_written_checkpoint_is_invisible(tmp_path):
    save_checkpoint(tmp_path, 2, _state(2), RunRecord(step=2), keep=5)
    # What a kill during the write of step 4 leaves: the temporary directory only.
    (tmp_path / "checkpoints" / ".step_4.tmp").mkdir()
    state, record = load_latest_checkpoint(tmp_path)
    assert record.step == 2
    save_checkpoint(tmp_path, 4, _state(4), RunRecord(step=4), keep=5)
    assert checkpoint_steps(tmp_path) == [4, 2]
    assert not (tmp_path / "checkpoints" / ".step_4.tmp").exists()


def test_pruning_keeps_the_newest_and_the_best(tmp_path):
    accuracy = {2: 0.5, 4: 0.9, 6: None, 8: 0.4, 10: None}
    for step, acc in accuracy.items():
        record = RunRecord(step=step, eval_accuracy_at_step=acc)
        save_checkpoint(tmp_path, step, _state(step), record, keep=2)
    assert checkpoint_steps(tmp_path) == [10, 8, 4]
    assert prune_checkpoints(tmp_path, keep=1) == [8]
    assert (tmp_path / "checkpoints" / "latest").read_text().strip() == "step_10"


def test_a_checkpoint_from_before_record_json_still_resumes(tmp_path):
    old = tmp_path / "checkpoints" / "step_3"
    old.mkdir(parents=True)
    torch.save(_state(3), old / "learner.pt")
    evaluation = {"accuracy": 0.5, "accuracy_ci95": [0.4, 0.6], "n": 4}
    book = {"trained_indices": [0, 1, 2], "dropped_indices": [5], "initial_eval": evaluation}
    (old / "bookkeeping.json").write_text(json.dumps(book))
    state, record = load_latest_checkpoint(tmp_path)
    assert state["version"] == 3 and record.step == 3
    assert record.trained_indices == [0, 1, 2] and record.settled() == {0, 1, 2, 5}
    assert record.initial_eval == record.last_eval == evaluation


def test_a_full_disk_is_named_and_leaves_no_partial_checkpoint(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    save_checkpoint(tmp_path, 2, _state(2), RunRecord(step=2), keep=5)

    def full_disk(obj, path):
        path.write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 10 vs 8")

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(torch, "save", full_disk)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(100, 100, 0))
    with pytest.raises(OSError, match="no space left on the disk of .* for checkpoint step_4"):
        save_checkpoint(tmp_path, 4, _state(4), RunRecord(step=4), keep=5)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["latest", "step_2"]
