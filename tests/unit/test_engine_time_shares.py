"""How the rollout side's engine spent its time: four shares that add up to 1, paused time out."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from sao.runtime.scheduler import ENGINE_SHARES, Scheduler


def scheduler_with(decode_s: float) -> Scheduler:
    loop = SimpleNamespace(
        decode_s=decode_s,
        decode_steps=4,
        decoding_sum=10,
        num_in_flight=0,
        engine=SimpleNamespace(version=0),
    )
    return Scheduler(loop, iter(()), out=None, weights=None, concurrency=4, batch_size=4)  # type: ignore[arg-type]


def test_the_shares_split_the_unpaused_wall_time():
    scheduler = scheduler_with(decode_s=2.0)
    scheduler.stats.busy_s = 3.0  # 2 s decoding, 1 s on environments
    scheduler.stats.swap_s = 1.0
    scheduler.stats.paused_s = 30.0  # an eval: must not count as the engine's idle time
    shares = scheduler.snapshot(started_at=time.perf_counter() - 40.0)
    assert [shares[k] for k in ENGINE_SHARES] == pytest.approx([0.2, 0.1, 0.1, 0.6], abs=1e-3)
    assert sum(shares[k] for k in ENGINE_SHARES) == pytest.approx(1.0)
    assert shares["engine_batch_mean"] == pytest.approx(2.5)


def test_the_shares_stay_between_0_and_1_when_counters_overlap():
    # A pause requested mid-tick overlaps that tick's busy time by a little: still a split of 1.
    scheduler = scheduler_with(decode_s=5.0)
    scheduler.stats.busy_s = 7.0
    scheduler.stats.swap_s = 1.0
    shares = scheduler.snapshot(started_at=time.perf_counter() - 6.0)
    values = [shares[k] for k in ENGINE_SHARES]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert sum(values) == pytest.approx(1.0)
