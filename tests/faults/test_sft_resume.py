"""An interrupted warm start continues from its saved state to the very same policy."""

from __future__ import annotations

import pytest
import torch

from sao.config import SFTConfig
from sao.envs.registry import make_demonstrations
from sao.models.policy import build_tiny_policy
from sao.models.tokenizer import build_tokenizer
from sao.warmstart.sft import train_sft

CONFIG = SFTConfig(steps=6, batch_size=4, warmup_steps=1, num_demonstrations=16, checkpoint_every=3)


class _Interrupt(Exception):
    pass


def _fresh():
    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    return build_tiny_policy(tokenizer, seed=0), tokenizer


def test_sft_stopped_after_a_save_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
    examples = make_demonstrations("calc", CONFIG.num_demonstrations, 0)
    model, tokenizer = _fresh()
    full_curve = train_sft(model, tokenizer, examples, CONFIG, progress=False)

    state = tmp_path / "sft_state.pt"

    def stop_after_first_save(name: str) -> None:
        if name == "sft-saved:3":
            raise _Interrupt

    monkeypatch.setattr("sao.warmstart.sft.pause_point", stop_after_first_save)
    interrupted, _ = _fresh()
    with pytest.raises(_Interrupt):
        train_sft(interrupted, tokenizer, examples, CONFIG, progress=False, state_path=state)
    assert state.exists()

    resumed, _ = _fresh()  # a new process would start from a fresh model, then load the state
    curve = train_sft(resumed, tokenizer, examples, CONFIG, progress=False, state_path=state)
    assert curve == pytest.approx(full_curve)
    for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


def test_a_state_saved_under_other_settings_is_not_continued(tmp_path, capsys):
    examples = make_demonstrations("calc", CONFIG.num_demonstrations, 0)
    model, tokenizer = _fresh()
    state = tmp_path / "sft_state.pt"
    train_sft(model, tokenizer, examples, CONFIG.model_copy(update={"steps": 4}), state_path=state)
    other, _ = _fresh()
    curve = train_sft(other, tokenizer, examples, CONFIG, progress=False, state_path=state)
    assert len(curve) == CONFIG.steps
    assert "other settings; starting over" in capsys.readouterr().out
