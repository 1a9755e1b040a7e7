"""`sao reproduce`: the paper's claims (a)-(g), and time to accuracy (h), each run over seeds and
judged by a fixed rule.

- `claims`: the table (arms, metrics, expected directions).
- `budgets`: `quick` and `full`, the run sizes.
- `readers`: the numbers a claim reads from a finished run's `summary.json` / `metrics.jsonl`.
- `stats`: the paired t-interval and the verdict rule.
- `runs`: the plan of runs (shared arms run once), the warm start, resumable execution.
- `report`: `report.json` and `report.md`; `plots`: one figure per claim.
- `time_to_accuracy`: claim (h)'s curves, the interpolated time to a target, the per-seed ratio;
  `paired`: judging such a two-run metric; `curves`: the curves in the report, and their plot.
- `command`: the entry point of `sao reproduce`.
"""
