"""`train.learner_ranks` is checked against the machine before any work: a CPU rank per core the
process may use at most, a CUDA rank per GPU."""

from __future__ import annotations

import os

import pytest

import sao.preflight
from sao.config import ConfigError, load_config
from sao.preflight import check_learner_ranks


def ranks(n: int, device: str = "cpu"):
    return load_config("sao", None, [f"train.learner_ranks={n}", f"train.learner_device={device}"])


def test_cpu_ranks_up_to_the_usable_cores_pass_and_one_more_is_refused(monkeypatch):
    monkeypatch.setattr(sao.preflight, "usable_cores", lambda: 4)
    check_learner_ranks(ranks(1))
    check_learner_ranks(ranks(4))
    with pytest.raises(ConfigError) as refused:
        check_learner_ranks(ranks(5))
    assert str(refused.value) == (
        "train.learner_ranks=5: learner_device=cpu runs one process per rank, and this machine "
        "has 4 CPU core(s) for them"
    )


def test_the_usable_cores_are_this_process_s():
    assert 1 <= sao.preflight.usable_cores() <= (os.cpu_count() or 1)


def test_cuda_ranks_beyond_the_gpus_are_refused(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    check_learner_ranks(ranks(2, "cuda"))
    with pytest.raises(ConfigError, match="learner_device=cuda puts one rank on each GPU"):
        check_learner_ranks(ranks(3, "cuda"))
