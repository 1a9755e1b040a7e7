"""A study's per-seed data (`sao.reproduce.study_data`): its format, and every verdict of the
published report judged again from the committed data."""

import json
import shutil
from pathlib import Path

import pytest

from sao.reproduce.claims import CLAIMS
from sao.reproduce.refresh import main as refresh_main
from sao.reproduce.refresh import refresh
from sao.reproduce.study_data import (
    SeedRecord,
    StudyData,
    read_study_data,
    write_study_data,
)

PUBLISHED = Path(__file__).resolve().parents[2] / "docs" / "reproduce"


def claim_c_data(sao: list[float], k1: list[float]) -> StudyData:
    """Claim (c) over len(sao) seeds: `sao`'s and `sao_k1`'s final accuracy per seed, explained
    variance 0.4 against 0.2."""
    records = []
    for seed, (a, b) in enumerate(zip(sao, k1, strict=True)):
        for arm, accuracy, ev in (("calc_sao", a, 0.4 + 0.01 * seed), ("calc_sao_k1", b, 0.2)):
            preset = arm.removeprefix("calc_")
            values = {"final_accuracy": accuracy, "vf_explained_var": ev}
            records.append(SeedRecord(arm, "calc", preset, (), seed, values=values))
    return StudyData("full", len(sao), ("abc1234",), ("c",), tuple(records), provenance="By hand.")


def test_the_format_reads_back_what_was_written(tmp_path):
    curve = {"train_s": [0.0, 12.5], "trajectories": [0.0, 64.0], "accuracy": [0.2, 0.4]}
    data = StudyData(
        "quick",
        1,
        ("abc1234",),
        ("h",),
        (
            SeedRecord(
                "calc_sao_timed",
                "calc",
                "sao",
                ("env.latency.median_s=0.5",),
                0,
                values={"final_accuracy": 0.4, "nan_metric": None},
                missing={"other": "runs/x/summary.json: no other"},
                curve=curve,
                settings={"steps": 20, "eval_n": 100},
            ),
            SeedRecord("calc_grpo_timed", "calc", "grpo", (), 0, finished=False),
        ),
        metrics={"final_accuracy": "held-out pass@1 at the end"},
        provenance="Runs made by hand.",
    )
    write_study_data(data, tmp_path / "study")
    lines = (tmp_path / "study" / "seeds.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["curve"] == curve
    back = read_study_data(tmp_path / "study")
    assert back == data.__class__(**{**data.__dict__, "where": back.where})
    assert back.curve("calc_sao_timed", 0) == curve
    assert back.value("nan_metric", "calc_sao_timed", 0) is None
    assert not back.finished("calc_grpo_timed", 0)


def _report_of(tmp_path: Path, data: StudyData) -> Path:
    write_study_data(data, tmp_path / "data" / "c")
    report = {
        "budget": "full",
        "seeds_requested": data.seeds,
        "data": "data/c",
        "claims": [{"id": "c"}],
    }
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    return path


def test_a_study_is_judged_from_its_data_files_by_the_rule(tmp_path, capsys):
    # K=2 ahead by 0.10, 0.12, 0.11 on accuracy and by 0.2+ on explained variance: reproduced.
    path = _report_of(tmp_path, claim_c_data([0.60, 0.62, 0.61], [0.50, 0.50, 0.50]))
    assert refresh_main([str(path)]) == 0
    (claim,) = json.loads(path.read_text())["claims"]
    accuracy = claim["comparisons"][1]
    assert accuracy["differences"] == pytest.approx([0.10, 0.12, 0.11])
    assert claim["verdict"] == "reproduced" and claim["seeds"] == 3
    assert json.loads(path.read_text())["commits"] == ["abc1234"]
    assert "(c) reproduced; seeds needed" in capsys.readouterr().out
    # The same study with sao_k1 ahead on one seed: inconclusive, from the data alone.
    write_study_data(claim_c_data([0.60, 0.62, 0.61], [0.50, 0.50, 0.80]), tmp_path / "data/c")
    assert refresh(path)["claims"][0]["verdict"] == "inconclusive"


def test_a_row_whose_data_is_gone_is_inconclusive_and_says_so(tmp_path, capsys):
    path = _report_of(tmp_path, claim_c_data([0.60, 0.62, 0.61], [0.50, 0.50, 0.50]))
    refresh(path)
    shutil.rmtree(tmp_path / "data" / "c")
    capsys.readouterr()
    assert refresh_main([str(path)]) == 0
    (claim,) = json.loads(path.read_text())["claims"]
    assert claim["verdict"] == "inconclusive" and claim["comparisons"] == []
    assert "data/c/study.json is not there" in claim["data_absent"]
    assert "(c) inconclusive (data absent:" in capsys.readouterr().out
    markdown = (tmp_path / "report.md").read_text()
    (row,) = [line for line in markdown.splitlines() if line.startswith("| (c)")]
    assert "data absent:" in row and "| **inconclusive** | 0 | n/a (data absent) |" in row


def test_the_published_report_is_judged_again_from_the_committed_data(tmp_path):
    # docs/reproduce/report.json, its report.md and every study's page are generated from
    # docs/reproduce/data (`python -m sao.reproduce.refresh`): a verdict edited anywhere else
    # would vanish at the next refresh, and every row has its data.
    for name in ("report.json", "data"):
        source = PUBLISHED / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name)
        else:
            shutil.copy(source, tmp_path / name)
    published = json.loads((PUBLISHED / "report.json").read_text())
    refreshed = refresh(tmp_path / "report.json")

    def rows(report):
        studies = [report, *report.get("other_studies", [])]
        return [
            (s.get("file"), c["id"], c["verdict"], c["seeds"], c.get("seeds_needed"))
            for s in studies
            for c in s["claims"]
        ]

    assert rows(refreshed) == rows(published)
    assert not [
        c
        for s in [refreshed, *refreshed["other_studies"]]
        for c in s["claims"]
        if c.get("data_absent")
    ]
    assert {c["id"] for c in refreshed["claims"]} <= set(CLAIMS)
    assert (tmp_path / "report.md").read_text() == (PUBLISHED / "report.md").read_text()
    for study in published["other_studies"]:
        page = study["file"]
        assert (tmp_path / page).read_text() == (PUBLISHED / page).read_text(), page
