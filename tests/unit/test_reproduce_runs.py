"""`sao reproduce` without training: which runs it starts, skips and resumes, and report.json.

The run function is a stub that writes what a finished run leaves (`summary.json`,
`metrics.jsonl`), with numbers chosen per preset and seed.
"""

import json
import shutil
from pathlib import Path

import pytest

from sao.config import ConfigError, load_config
from sao.reproduce.budgets import BUDGETS
from sao.reproduce.claims import CLAIMS
from sao.reproduce.command import run_reproduce_command
from sao.reproduce.runs import execute, plan

# Held-out accuracy and explained variance a stub run of each preset reports (+ 0.01 * seed).
ACCURACY = {"sao": 0.60, "sao_k1": 0.50, "grpo_dis": 0.55, "grpo": 0.45, "running_mean": 0.30}
EXPLAINED_VARIANCE = {"sao": 0.4, "sao_k1": 0.2}


class StubRuns:
    """Records each call and writes a finished run's files."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.warm_starts: list[str] = []

    def run(self, config, run_dir: Path, resume: bool) -> None:
        self.calls.append((str(run_dir), resume))
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(f"preset: {config.preset}\n")
        seed = config.train.seed
        ev = EXPLAINED_VARIANCE.get(config.preset, 0.0) + 0.01 * seed
        rows = [{"step": s, "critic/vf_explained_var": ev + 0.001 * s} for s in range(1, 4)]
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        accuracy = ACCURACY[config.preset] + 0.01 * seed
        (run_dir / "summary.json").write_text(json.dumps({"final_accuracy": accuracy}))

    def warm_start(self, config) -> None:
        assert config.train.seed == 0, "the shared warm start is built at one seed"
        self.warm_starts.append(str(config.warm_start_dir()))


def test_finished_runs_are_skipped_and_interrupted_ones_resumed(tmp_path):
    runs = plan([CLAIMS["c"]], seeds=2, out=tmp_path)
    by_name = {(r.arm.key, r.seed): r.run_dir for r in runs}
    finished = by_name[("calc_sao", 0)]
    finished.mkdir(parents=True)
    (finished / "summary.json").write_text("{}")
    interrupted = by_name[("calc_sao_k1", 1)]
    interrupted.mkdir(parents=True)
    (interrupted / "config.yaml").write_text("preset: sao_k1\n")
    stub = StubRuns()

    counts = execute(runs, BUDGETS["quick"], stub.run, stub.warm_start, progress=False)

    assert counts == {"finished": 1, "interrupted": 1, "new": 2}
    assert sorted(stub.calls) == sorted(
        [
            (str(by_name[("calc_sao_k1", 0)]), False),
            (str(by_name[("calc_sao", 1)]), False),
            (str(interrupted), True),
        ]
    )
    assert stub.warm_starts == ["checkpoints/warm_start_calc"]  # the real one, built once

    stub.calls.clear()
    again = execute(runs, BUDGETS["quick"], stub.run, stub.warm_start, progress=False)
    assert again == {"finished": 4, "interrupted": 0, "new": 0} and stub.calls == []


def test_arms_shared_by_claims_run_once_per_seed(tmp_path):
    runs = plan([CLAIMS["a"], CLAIMS["e"]], seeds=3, out=tmp_path)
    keys = [(r.arm.key, r.seed) for r in runs]
    assert len(keys) == len(set(keys)) == 4 * 3  # sao, grpo_dis, grpo, running_mean
    assert {r.run_dir for r in runs if r.arm.key == "calc_sao"} == {
        tmp_path / "calc_sao" / f"seed{k}" for k in range(3)
    }


def test_quick_runs_get_the_budget_seed_and_the_real_warm_start(tmp_path):
    stub = StubRuns()
    seen = []
    execute(
        plan([CLAIMS["c"]], seeds=2, out=tmp_path),
        BUDGETS["quick"],
        lambda config, run_dir, resume: seen.append(config),
        stub.warm_start,
        progress=False,
    )
    assert {(c.preset, c.train.seed) for c in seen} == {
        (p, s) for p in ("sao", "sao_k1") for s in (0, 1)
    }
    assert all(c.train.steps == 20 and c.train.batch_size == 16 for c in seen)
    assert all(c.warm_start_dir() == Path("checkpoints/warm_start_calc") for c in seen)
    assert all(c.sft == load_config("sao", None, ["env.name=calc"]).sft for c in seen)
    assert {c.critic.k_updates for c in seen} == {1, 2}


def test_report_json_holds_each_claim_with_its_numbers_and_verdict(tmp_path, capsys):
    stub = StubRuns()
    code = run_reproduce_command(
        ["a", "c"], 3, "quick", tmp_path, stub.run, stub.warm_start, progress=False
    )
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert [c["id"] for c in report["claims"]] == ["a", "c"]
    for claim in report["claims"]:
        assert claim["verdict"] in ("reproduced", "not reproduced", "inconclusive")
        assert claim["seeds"] == 3
        for comp in claim["comparisons"]:
            assert len(comp["left_values"]) == len(comp["right_values"]) == 3
            assert len(comp["differences"]) == 3
            assert comp["ci95"][0] <= comp["mean_difference"] <= comp["ci95"][1]
            assert all(len(values) == 3 for values in comp["arm_values"].values())
    claim_c = report["claims"][1]
    accuracy = claim_c["comparisons"][1]
    assert accuracy["arm_values"]["calc_sao"] == pytest.approx([0.60, 0.61, 0.62])
    assert accuracy["differences"] == pytest.approx([0.10, 0.10, 0.10])
    # Identical paired differences: a zero-width interval above 0 on both metrics.
    assert claim_c["verdict"] == "reproduced"
    # Zero spread: the rule would decide both claims at the smallest study, 2 seeds.
    assert (claim_c["seeds_needed"], claim_c["verdict_at_seeds_needed"]) == (2, "reproduced")
    assert accuracy["sd"] == pytest.approx(0.0, abs=1e-12)
    assert report["commits"] == json.loads((tmp_path / "study.json").read_text())["commits"]
    markdown = (tmp_path / "report.md").read_text()
    # The report opens with its current answer per claim, paper's figure and seeds needed
    # included; a claim the study did not run is listed as such.
    assert markdown.splitlines()[2] == "## Current answer per claim"
    row_c = next(line for line in markdown.splitlines() if line.startswith("| (c) "))
    assert CLAIMS["c"].paper in row_c and "2 (then reproduced)" in row_c
    assert "final_accuracy sao - sao_k1: +0.100 [+0.100, +0.100]" in row_c
    assert row_c.endswith("| the only study of this claim in this report |")
    row_b = next(line for line in markdown.splitlines() if line.startswith("| (b) "))
    assert "| **not run** |" in row_b
    assert "## History" not in markdown  # one study: nothing it replaces
    assert markdown.index("| claim | paper") < markdown.index("Verdict rule")
    assert markdown.index("Verdict rule") < markdown.index("| seed |")
    assert (tmp_path / "plots" / "claim_a.png").stat().st_size > 0
    assert (tmp_path / "plots" / "claim_c.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "(c) reproduced" in out and "seeds needed at the observed effects: 2" in out


def test_a_study_records_the_commits_its_runs_were_made_at(tmp_path):
    from sao.reproduce.command import check_study, record_commit

    check_study(tmp_path, "quick")
    assert record_commit(tmp_path, "abc1234") == ["abc1234"]
    assert record_commit(tmp_path, "abc1234") == ["abc1234"]
    assert record_commit(tmp_path, None) == ["abc1234"]
    assert record_commit(tmp_path, "def5678") == ["abc1234", "def5678"]
    study = json.loads((tmp_path / "study.json").read_text())
    assert study == {"budget": "quick", "commits": ["abc1234", "def5678"]}


def _set_accuracy(data_dir: Path, arm: str, values: list[float], **study) -> None:
    """`arm`'s final accuracy per seed, written into a study's per-seed data (and `study`'s
    fields, such as its budget and commits)."""
    from dataclasses import replace

    from sao.reproduce.study_data import read_study_data, write_study_data

    data = read_study_data(data_dir)
    records = tuple(
        replace(r, values={**r.values, "final_accuracy": values[r.seed]}) if r.arm == arm else r
        for r in data.records
    )
    write_study_data(replace(data, records=records, **study), data_dir)


def test_refresh_rejudges_a_report_from_its_studys_data(tmp_path, capsys):
    from sao.reproduce.refresh import main as refresh_main

    stub = StubRuns()
    run_reproduce_command(["c"], 3, "quick", tmp_path, stub.run, stub.warm_start, progress=False)
    path = tmp_path / "report.json"
    report = json.loads(path.read_text())
    # An older report: no power analysis, no paper figure; its numbers are not read.
    claim = report["claims"][0]
    for key in ("seeds_needed", "verdict_at_seeds_needed", "paper"):
        del claim[key]
    claim["comparisons"][1]["right_values"][2] = 99.0
    report["provenance"] = "Runs made by hand."
    path.write_text(json.dumps(report))
    # The data is what is judged: sao_k1 now wins on seed 2.
    _set_accuracy(tmp_path / "data", "calc_sao_k1", [0.50, 0.51, 0.80])
    capsys.readouterr()

    assert refresh_main([str(path)]) == 0
    refreshed = json.loads(path.read_text())["claims"][0]
    accuracy = refreshed["comparisons"][1]
    assert accuracy["differences"] == pytest.approx([0.10, 0.10, -0.18])
    assert accuracy["verdict"] == "inconclusive" and refreshed["verdict"] == "inconclusive"
    assert refreshed["paper"] == CLAIMS["c"].paper
    assert refreshed["seeds_needed"] == accuracy["seeds_needed"]
    assert "(c) inconclusive; seeds needed" in capsys.readouterr().out
    assert "Runs made by hand." in (tmp_path / "report.md").read_text()


def _report_with_three_studies_of_c(tmp_path: Path) -> Path:
    """A report of claim (c) listing two other studies of (c), the second marked current."""
    stub = StubRuns()
    other = tmp_path / "other"
    run_reproduce_command(["c"], 3, "quick", other, stub.run, stub.warm_start, progress=False)
    main_dir = tmp_path / "main"
    run_reproduce_command(["c"], 3, "quick", main_dir, stub.run, stub.warm_start, progress=False)
    separate = json.loads((other / "report.json").read_text())
    # The separate study's sao_k1 now wins on every seed: its verdict must flip on refresh.
    shutil.copytree(other / "data", main_dir / "data_separate")
    _set_accuracy(
        main_dir / "data_separate", "calc_sao_k1", [0.95, 0.96, 0.97], commits=("abc1234",)
    )
    separate["data"] = "data_separate"
    latest = json.loads((other / "report.json").read_text())
    latest["data"] = "../other/data"
    _set_accuracy(
        other / "data", "calc_sao_k1", [0.50, 0.51, 0.52], budget="full", commits=("def5678",)
    )
    latest["claims"][0] |= {"current": True, "why_current": "The latest and largest."}
    latest["claims"][0] |= {"seeds_added_after_looking": [1, 2], "after_looking": "seed 0 read"}
    path = main_dir / "report.json"
    report = json.loads(path.read_text())
    report["other_studies"] = [
        {**separate, "file": "quick_claim_c.md"},
        {**latest, "file": "c2.md", "note": "K=3"},
    ]
    path.write_text(json.dumps(report))
    return path


def test_claims_of_other_studies_are_judged_again_and_one_per_claim_opens_the_report(tmp_path):
    from sao.reproduce.refresh import refresh

    path = _report_with_three_studies_of_c(tmp_path)
    refreshed = refresh(path)
    (elsewhere,) = refreshed["other_studies"][0]["claims"]
    assert refreshed["other_studies"][1]["note"] == "K=3"
    assert elsewhere["verdict"] == "not reproduced"
    assert refreshed["claims"][0]["verdict"] != "not reproduced"
    markdown = path.with_name("report.md").read_text()
    current, history = markdown.split("## History")
    # One row per claim of the claim table, in its order: (c) from the study marked current.
    rows = [line for line in current.splitlines() if line.startswith("| (")]
    assert [row.split(")")[0].removeprefix("| (") for row in rows] == list(CLAIMS)
    (row_c,) = [row for row in rows if row.startswith("| (c)")]
    assert row_c.endswith(
        "| `def5678`, budget `full`: [c2.md](c2.md); K=3; added after looking: seed 0 read "
        "| The latest and largest. |"
    )
    # The mark on seeds run after a look, in the seeds column.
    assert "| 3 (1, 2 added after looking) |" in row_c
    assert all("| **not run** |" in row for row in rows if not row.startswith("| (c)"))
    # The other two studies of (c) follow, in the order they are listed.
    earlier = [line for line in history.split("\n\n")[2].splitlines() if line.startswith("| (c)")]
    assert len(earlier) == 2
    assert earlier[0].endswith("budget `quick`: this report (its claims' sections below) |")
    assert "**not reproduced**" in earlier[1]
    assert earlier[1].endswith("`abc1234`, budget `quick`: [quick_claim_c.md](quick_claim_c.md) |")


@pytest.mark.parametrize("marked", [0, 2])
def test_refresh_refuses_a_claim_without_exactly_one_current_study_in_one_line(
    tmp_path, capsys, marked
):
    from sao.reproduce.refresh import main as refresh_main

    path = _report_with_three_studies_of_c(tmp_path)
    report = json.loads(path.read_text())
    for study in report["other_studies"]:
        study["claims"][0].pop("current", None)
    for study in report["other_studies"][:marked]:
        study["claims"][0] |= {"current": True, "why_current": "The latest."}
    path.write_text(json.dumps(report))
    before = path.with_name("report.md").read_text()
    capsys.readouterr()

    assert refresh_main([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    if marked:
        assert "claim (c) has 2 studies marked current (quick_claim_c.md, c2.md)" in err
    else:
        assert "claim (c) has 3 studies (the report's own study, quick_claim_c.md, c2.md)" in err
        assert 'none marked "current": true' in err
    # Nothing was rewritten.
    assert json.loads(path.read_text()) == report
    assert path.with_name("report.md").read_text() == before


def test_refresh_refuses_a_file_that_is_not_a_report_in_one_line(tmp_path, capsys):
    from sao.reproduce.refresh import main as refresh_main

    path = tmp_path / "report.json"
    path.write_text("{}")
    assert refresh_main([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing field 'claims'" in err


def test_a_missing_metric_is_named_and_leaves_the_claim_inconclusive(tmp_path):
    stub = StubRuns()

    def run_without_metrics(config, run_dir, resume):
        stub.run(config, run_dir, resume)
        (run_dir / "metrics.jsonl").write_text("")

    run_reproduce_command(
        ["c"], 2, "quick", tmp_path, run_without_metrics, stub.warm_start, progress=False
    )
    claim = json.loads((tmp_path / "report.json").read_text())["claims"][0]
    ev = claim["comparisons"][0]
    assert ev["differences"] == [] and ev["verdict"] == "inconclusive"
    assert any("critic/vf_explained_var" in line for line in ev["missing"])
    assert claim["verdict"] == "inconclusive" and claim["seeds"] == 0


def test_a_study_is_not_continued_at_another_budget(tmp_path):
    stub = StubRuns()
    run_reproduce_command(["c"], 1, "quick", tmp_path, stub.run, stub.warm_start, progress=False)
    with pytest.raises(ConfigError, match="--budget quick study"):
        run_reproduce_command(["c"], 1, "full", tmp_path, stub.run, stub.warm_start, progress=False)


def test_staleness_arms_run_the_documented_overlay():
    overlay = Path(__file__).resolve().parents[2] / "examples" / "staleness.yaml"
    if not overlay.is_file():
        pytest.skip("examples/staleness.yaml is not in this checkout")
    import yaml

    from sao.presets import leaf_items
    from sao.reproduce.claims import STALENESS_OVERRIDES

    expected = leaf_items(yaml.safe_load(overlay.read_text()))
    given = dict(o.split("=", 1) for o in STALENESS_OVERRIDES)
    assert {k: yaml.safe_load(v) for k, v in given.items()} == expected


def test_an_unfinished_run_is_not_read(tmp_path):
    from sao.reproduce.readers import MissingMetric, step_mean

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text(json.dumps({"step": 1, "x": 0.5}) + "\n")
    with pytest.raises(MissingMetric, match="has not finished"):
        step_mean("x")(run_dir)
    (run_dir / "summary.json").write_text("{}")
    assert step_mean("x")(run_dir) == 0.5


def test_report_only_runs_nothing_and_judges_no_claim_from_part_of_its_runs(tmp_path, capsys):
    stub = StubRuns()
    run_reproduce_command(["c"], 2, "quick", tmp_path, stub.run, stub.warm_start, progress=False)
    ran = len(stub.calls)
    code = run_reproduce_command(
        ["a", "c"],
        2,
        "quick",
        tmp_path,
        stub.run,
        stub.warm_start,
        progress=False,
        report_only=True,
    )
    assert code == 0 and len(stub.calls) == ran, "--report-only must start no run"
    claims = {c["id"]: c for c in json.loads((tmp_path / "report.json").read_text())["claims"]}
    assert claims["c"]["verdict"] == "reproduced"
    assert (claims["c"]["runs_finished"], claims["c"]["runs_planned"]) == (4, 4)
    # Claim (a) shares calc_sao with (c): 2 of its 6 runs exist, so it is shown, not judged.
    assert claims["a"]["verdict"] == "not run"
    assert (claims["a"]["runs_finished"], claims["a"]["runs_planned"]) == (2, 6)
    assert (
        "| (a) SAO > GRPO+DIS > GRPO on held-out accuracy |" in (tmp_path / "report.md").read_text()
    )
    assert "4 not run (--report-only)" in capsys.readouterr().out


def test_report_only_needs_a_study(tmp_path):
    stub = StubRuns()
    with pytest.raises(ConfigError, match="holds no study"):
        run_reproduce_command(
            ["c"], 1, "quick", tmp_path / "none", stub.run, stub.warm_start, report_only=True
        )


def record_run_in_worker(config, run_dir: Path, resume: bool) -> None:
    """A run function for worker processes (module-level, so it pickles): writes a finished
    run's summary with the process and torch threads it ran under."""
    import os

    import torch

    run_dir.mkdir(parents=True, exist_ok=True)
    summary = {"pid": os.getpid(), "threads": torch.get_num_threads(), "resume": resume}
    (run_dir / "summary.json").write_text(json.dumps(summary))


def test_workers_train_the_unfinished_runs_in_other_processes_on_a_share_of_the_cores(
    tmp_path, monkeypatch
):
    import os

    import sao.reproduce.runs as runs_module

    monkeypatch.setattr(runs_module, "cpu_count", lambda: 4)
    runs = plan([CLAIMS["c"]], seeds=2, out=tmp_path)
    by_name = {(r.arm.key, r.seed): r.run_dir for r in runs}
    (by_name[("calc_sao", 0)]).mkdir(parents=True)
    (by_name[("calc_sao", 0)] / "summary.json").write_text("{}")
    by_name[("calc_sao_k1", 1)].mkdir(parents=True)
    (by_name[("calc_sao_k1", 1)] / "config.yaml").write_text("preset: sao_k1\n")
    stub = StubRuns()

    counts = execute(
        runs, BUDGETS["quick"], record_run_in_worker, stub.warm_start, progress=False, workers=2
    )

    assert counts == {"finished": 1, "interrupted": 1, "new": 2}
    assert stub.warm_starts == ["checkpoints/warm_start_calc"]  # built once, before the workers
    ran = {key: json.loads((d / "summary.json").read_text()) for key, d in by_name.items()}
    assert ran[("calc_sao", 0)] == {}  # finished before: not run again
    trained = [ran[key] for key in by_name if key != ("calc_sao", 0)]
    assert all(r["pid"] != os.getpid() and r["threads"] == 2 for r in trained)
    assert sorted(r["resume"] for r in trained) == [False, False, True]


def claim_c_in_two_workers(out: Path, run_fn) -> None:
    """Claim (c)'s two runs at one seed, each in a worker process."""
    execute(
        plan([CLAIMS["c"]], seeds=1, out=out),
        BUDGETS["quick"],
        run_fn,
        StubRuns().warm_start,
        progress=False,
        workers=2,
    )


def fail_in_worker(config, run_dir: Path, resume: bool) -> None:
    raise RuntimeError(f"{run_dir.name} failed")


def test_a_run_failing_in_a_worker_is_raised_with_the_workers_traceback(tmp_path):
    from sao.reproduce.runs import WorkerTraceback

    with pytest.raises(RuntimeError, match="seed. failed") as info:
        claim_c_in_two_workers(tmp_path, fail_in_worker)
    assert isinstance(info.value.__cause__, WorkerTraceback)
    assert "in fail_in_worker" in str(info.value.__cause__)


def test_a_study_in_use_by_another_process_is_refused(tmp_path):
    from sao.reproduce.command import study_lock

    stub = StubRuns()
    args = (["c"], 1, "quick", tmp_path, stub.run, stub.warm_start)
    with study_lock(tmp_path), pytest.raises(ConfigError, match="in use by another sao reproduce"):
        run_reproduce_command(*args, progress=False)
    assert stub.calls == []
    assert run_reproduce_command(*args, progress=False) == 0  # the lock went with its holder


def hang_or_fail_in_worker(config, run_dir: Path, resume: bool) -> None:
    """`sao` runs hang (noting that they started); the other arm fails once one has started."""
    import time

    marks = run_dir.parent.parent
    if config.preset == "sao":
        (marks / "sao_started").write_text("")
        time.sleep(120)
        (marks / "sao_finished").write_text("")
        return
    while not (marks / "sao_started").exists():
        time.sleep(0.05)
    raise RuntimeError("sao_k1 failed")


def test_a_failure_stops_the_runs_still_training(tmp_path):
    with pytest.raises(RuntimeError, match="sao_k1 failed"):
        claim_c_in_two_workers(tmp_path, hang_or_fail_in_worker)
    assert (tmp_path / "sao_started").exists() and not (tmp_path / "sao_finished").exists()
