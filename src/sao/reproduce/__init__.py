"""`sao reproduce`: the paper's claims (a)-(g), each run over seeds and judged by a fixed rule.

- `claims`: the table (arms, metrics, expected directions).
- `budgets`: `quick` and `full`, the run sizes.
- `readers`: the numbers a claim reads from a finished run's `summary.json` / `metrics.jsonl`.
- `stats`: the paired t-interval and the verdict rule.
- `runs`: the plan of runs (shared arms run once), the warm start, resumable execution.
- `report`: `report.json` and `report.md`; `plots`: one figure per claim.
- `command`: the entry point of `sao reproduce`.
"""
