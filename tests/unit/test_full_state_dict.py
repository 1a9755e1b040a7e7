"""`full_state_dict`: a copy the model's updates leave alone, one copy per shared tensor."""

from __future__ import annotations

import torch
from torch import nn

from sao.learner.sharding import full_state_dict


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 4)
        self.head = nn.Linear(4, 11, bias=False)
        self.head.weight = self.embed.weight
        self.norm = nn.LayerNorm(4)


def test_tied_weights_share_one_copy_and_untied_ones_do_not() -> None:
    state = full_state_dict(_Tied())
    assert state["embed.weight"] is state["head.weight"]
    assert state["norm.weight"] is not state["norm.bias"]
    assert state.keys() == _Tied().state_dict().keys()


def test_the_copy_is_apart_from_the_model() -> None:
    model = _Tied()
    state = full_state_dict(model)
    before = state["embed.weight"].clone()
    with torch.no_grad():
        model.embed.weight.add_(1.0)
    assert torch.equal(state["embed.weight"], before)
    assert state["embed.weight"].untyped_storage().data_ptr() != (
        model.embed.weight.untyped_storage().data_ptr()
    )


def test_without_copy_the_live_tensors_come_back() -> None:
    model = _Tied()
    state = full_state_dict(model, copy=False)
    assert state["embed.weight"].data_ptr() == model.embed.weight.data_ptr()
    assert state["head.weight"] is state["embed.weight"]


def test_a_loaded_copy_restores_the_model() -> None:
    model = _Tied()
    state = full_state_dict(model)
    with torch.no_grad():
        model.embed.weight.zero_()
    model.load_state_dict(state)
    assert torch.equal(model.head.weight, state["head.weight"])
    assert model.head.weight.abs().sum() > 0
