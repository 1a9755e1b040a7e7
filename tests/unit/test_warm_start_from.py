"""`model.warm_start_from`: the warm start trains from a checkpoint of one's own (an imported
GGUF, say) rather than the tiny default, for `sao sft` and `sao train`'s on-demand warm start."""

from __future__ import annotations

from pathlib import Path

import sao.runtime.starting_policy as starting_module
from sao.config import load_config


def test_train_warms_up_from_the_named_checkpoint_when_it_finds_no_warm_start(
    tmp_path, monkeypatch, bpe_qwen3_dense_dir
):
    calls = []

    def fake_warm_start(env, out, sft, **kwargs):
        calls.append((env, Path(out), kwargs["model_path"]))
        return Path(out)

    monkeypatch.setattr(starting_module, "warm_start", fake_warm_start)
    config = load_config(
        "sao",
        None,
        [
            f"model.warm_start_from={bpe_qwen3_dense_dir}",
            f"model.warm_start_dir={tmp_path}/warm_{{env}}",
        ],
    )
    assert starting_module.starting_policy(config, progress=False) == tmp_path / "warm_calc"
    assert calls == [("calc", tmp_path / "warm_calc", str(bpe_qwen3_dense_dir))]
