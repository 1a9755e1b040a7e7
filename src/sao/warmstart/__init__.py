"""The warm start: a policy taught an environment's protocol before RL.

- `sao.warmstart.sft`: `sao sft`, supervised training on a scripted teacher's demonstrations;
- `sao.warmstart.record`: what a warm start was trained on, saved beside it, so a stale one is
  noticed when it is used.
"""
