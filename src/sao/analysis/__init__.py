"""Analyses of finished runs, saved evals and teachers: what `sao inspect` runs (`sao.analysis.cli`
lists them), each the command behind numbers the docs cite.

`runs` is the one reader of run directories; the first/last windows and finite means they share
with the runtime's drift check are `sao.core.windows`.
"""
