"""The per-seed data a study's verdicts are computed from, kept apart from the runs.

A study's data is a directory of two files:

- `study.json`: `{"budget", "seeds", "commits", "claims", "metrics", "provenance"}`: the
  budget the runs were made at, how many seeds (0 .. seeds-1) each claim reads, the short
  commits of the checkout the runs were started at, the claim ids the study answers, what each
  metric meant when the runs were read (by name; one the study does not give is described as
  the claim table describes it now), and a text saying how, when and where the runs were made
  (empty when nothing was written down);
- `seeds.jsonl`: one line per (arm, seed), `{"arm", "env", "preset", "overrides", "seed",
  "finished", "values", "missing", "curve", "settings"}`: the run's number for each metric a
  comparison reads from it (`values`, by metric name; `null` when not finite or missing),
  why a value is missing (`missing`, by metric name, or `curve`), claim (h)'s accuracy curve
  (`{"train_s", "trajectories", "accuracy"}`, evals in order; `null` for an arm without one),
  and the run's settings (`train.steps`, `train.batch_size`, `train.eval_n`, `train.eval_every`,
  `train.eval_every_s` as its `config.yaml` had them; `{}` when not recorded).

`sao reproduce` writes it from the run directories (`collect_study_data`) and judges the study
from it, and `python -m sao.reproduce.refresh` judges committed studies from it again; no
checkpoint or run directory is needed for either.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sao.plumbing.durable import atomic_write_json, atomic_write_text
from sao.reproduce.claims import Claim, PairedMetric
from sao.reproduce.readers import Metric, MissingMetric
from sao.reproduce.runs import arms_of, run_dir_for, run_state
from sao.reproduce.time_to_accuracy import read_curve

STUDY_FILE = "study.json"
SEEDS_FILE = "seeds.jsonl"
CURVE = "curve"
"""The key under `missing` that says why a run has no curve."""
SETTINGS = ("steps", "batch_size", "eval_n", "eval_every", "eval_every_s")
"""The `train.*` settings each line keeps from its run's `config.yaml`."""


class DataAbsent(LookupError):
    """A study's data directory, or one of its files, is not there."""


@dataclass(frozen=True)
class SeedRecord:
    """One arm at one seed: what the verdicts read from its run."""

    arm: str
    env: str
    preset: str
    overrides: tuple[str, ...]
    seed: int
    finished: bool = True
    values: dict[str, float | None] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    curve: dict[str, list[float]] | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "env": self.env,
            "preset": self.preset,
            "overrides": list(self.overrides),
            "seed": self.seed,
            "finished": self.finished,
            "values": self.values,
            "missing": self.missing,
            "curve": self.curve,
            "settings": self.settings,
        }

    @classmethod
    def from_dict(cls, line: dict[str, Any]) -> SeedRecord:
        return cls(
            arm=line["arm"],
            env=line["env"],
            preset=line["preset"],
            overrides=tuple(line.get("overrides", ())),
            seed=int(line["seed"]),
            finished=bool(line.get("finished", True)),
            values=dict(line.get("values", {})),
            missing=dict(line.get("missing", {})),
            curve=line.get("curve"),
            settings=dict(line.get("settings", {})),
        )


@dataclass(frozen=True)
class StudyData:
    """A study's settings and its per-seed records; what `sao.reproduce.report` judges."""

    budget: str
    seeds: int
    commits: tuple[str, ...]
    claims: tuple[str, ...]
    records: tuple[SeedRecord, ...]
    metrics: dict[str, str] = field(default_factory=dict)
    provenance: str = ""
    where: str = ""
    """Where the data was read from (named when a value is missing); not written."""

    def record(self, arm: str, seed: int) -> SeedRecord | None:
        return next((r for r in self.records if r.arm == arm and r.seed == seed), None)

    def _record_or_raise(self, arm: str, seed: int) -> SeedRecord:
        record = self.record(arm, seed)
        if record is None:
            raise MissingMetric(f"{self.where or SEEDS_FILE}: no line for {arm} seed {seed}")
        return record

    def value(self, metric: str, arm: str, seed: int) -> float | None:
        """`metric` of `arm` at `seed`: None when it was not finite; MissingMetric (with the
        reason the run gave) when the run lacked it."""
        record = self._record_or_raise(arm, seed)
        if metric in record.missing:
            raise MissingMetric(record.missing[metric])
        if metric not in record.values:
            raise MissingMetric(f"{self.where or SEEDS_FILE}: {arm} seed {seed} has no {metric}")
        return record.values[metric]

    def curve(self, arm: str, seed: int) -> dict[str, list[float]]:
        """The accuracy curve of `arm` at `seed`; MissingMetric when it has none."""
        record = self._record_or_raise(arm, seed)
        if record.curve is None:
            why = record.missing.get(CURVE, f"{arm} seed {seed} has no curve")
            raise MissingMetric(why)
        return record.curve

    def finished(self, arm: str, seed: int) -> bool:
        record = self.record(arm, seed)
        return record is not None and record.finished


def write_study_data(data: StudyData, directory: Path) -> None:
    """`study.json` and `seeds.jsonl` under `directory` (made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_json(
        directory / STUDY_FILE,
        {
            "budget": data.budget,
            "seeds": data.seeds,
            "commits": list(data.commits),
            "claims": list(data.claims),
            "metrics": data.metrics,
            "provenance": data.provenance,
        },
    )
    lines = (json.dumps(r.to_dict(), allow_nan=False) for r in data.records)
    atomic_write_text(directory / SEEDS_FILE, "".join(line + "\n" for line in lines))


def read_study_data(directory: Path) -> StudyData:
    """The study `write_study_data` wrote; DataAbsent names a missing directory or file."""
    for name in (STUDY_FILE, SEEDS_FILE):
        if not (directory / name).is_file():
            raise DataAbsent(f"{directory / name} is not there")
    study = json.loads((directory / STUDY_FILE).read_text())
    lines = (directory / SEEDS_FILE).read_text().splitlines()
    return StudyData(
        budget=study["budget"],
        seeds=int(study["seeds"]),
        commits=tuple(study.get("commits", ())),
        claims=tuple(study.get("claims", ())),
        records=tuple(SeedRecord.from_dict(json.loads(line)) for line in lines if line.strip()),
        metrics=dict(study.get("metrics", {})),
        provenance=study.get("provenance", ""),
        where=str(directory / SEEDS_FILE),
    )


def _metrics_by_arm(claims: list[Claim]) -> dict[str, list[Metric]]:
    """Per arm key, the per-run metrics some comparison reads from it."""
    wanted: dict[str, list[Metric]] = {}
    for claim in claims:
        for comparison in claim.comparisons:
            if isinstance(comparison.metric, PairedMetric):
                continue
            for side in (comparison.left, comparison.right):
                for arm in side.arms():
                    metrics = wanted.setdefault(arm.key, [])
                    if all(m.name != comparison.metric.name for m in metrics):
                        metrics.append(comparison.metric)
    return wanted


def _curve_arms(claims: list[Claim]) -> set[str]:
    """The arms whose curves a claim keeps or a paired comparison reads."""
    keys = {arm.key for claim in claims if claim.curves for arm in claim.arms}
    for claim in claims:
        for comparison in claim.comparisons:
            if isinstance(comparison.metric, PairedMetric):
                keys |= {comparison.left.arm.key, comparison.right.arm.key}
    return keys


def run_settings(run_dir: Path) -> dict[str, Any]:
    """The `train.*` settings of `SETTINGS` from a run's `config.yaml` ({} without one)."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        return {}
    config = yaml.safe_load(path.read_text()) or {}
    train = config.get("train") if isinstance(config, dict) else None
    if not isinstance(train, dict):
        return {}
    return {key: train[key] for key in SETTINGS if key in train}


def collect_study_data(
    claims: list[Claim], seeds: int, budget: str, out: Path, commits: list[str] | None = None
) -> StudyData:
    """Read every arm of `claims` at seeds 0 .. seeds-1 from the run directories under `out`."""
    metrics = _metrics_by_arm(claims)
    curve_arms = _curve_arms(claims)
    records = []
    for seed in range(seeds):
        for arm in arms_of(claims):
            run_dir = run_dir_for(out, arm, seed)
            values: dict[str, float | None] = {}
            missing: dict[str, str] = {}
            for metric in metrics.get(arm.key, []):
                try:
                    value = metric.read(run_dir)
                    values[metric.name] = value if math.isfinite(value) else None
                except MissingMetric as err:
                    missing[metric.name] = str(err)
            curve = None
            if arm.key in curve_arms:
                try:
                    curve = read_curve(run_dir).to_dict()
                except MissingMetric as err:
                    missing[CURVE] = str(err)
            records.append(
                SeedRecord(
                    arm=arm.key,
                    env=arm.env,
                    preset=arm.preset,
                    overrides=tuple(arm.overrides),
                    seed=seed,
                    finished=run_state(run_dir) == "finished",
                    values=values,
                    missing=missing,
                    curve=curve,
                    settings=run_settings(run_dir),
                )
            )
    return StudyData(
        budget=budget,
        seeds=seeds,
        commits=tuple(commits or ()),
        claims=tuple(claim.id for claim in claims),
        records=tuple(records),
        metrics={c.metric.name: c.metric.description for cl in claims for c in cl.comparisons},
    )
