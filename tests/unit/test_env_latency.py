"""The environment-latency overlay: seeded long-tailed draws, and episodes held back by them
while the agent loop keeps the others going (driven by an injected clock, nothing timed)."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest
import torch

from sao.config import load_config
from sao.envs.base import Environment, StepResult, Task
from sao.models.policy import build_tiny_policy
from sao.models.tokenizer import build_tokenizer
from sao.rollout.agent_loop import AgentLoop
from sao.rollout.engine import RolloutEngine, SamplingParams
from sao.rollout.latency import LatencySampler
from sao.rollout.setup import env_latency

N = 40_000


def _empirical(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[int(p * len(ordered))]


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.99])
def test_lognormal_draws_match_the_quantiles_of_median_and_sigma(p):
    sampler = LatencySampler("lognormal", median_s=2.0, sigma=0.8, max_s=1e9, seed=3)
    draws = [sampler() for _ in range(N)]
    expected = 2.0 * math.exp(0.8 * NormalDist().inv_cdf(p))
    assert sampler.quantile(p) == pytest.approx(expected)
    assert _empirical(draws, p) == pytest.approx(expected, rel=0.05)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.99])
def test_pareto_draws_have_the_median_asked_for_and_a_power_tail(p):
    sampler = LatencySampler("pareto", median_s=0.5, alpha=1.5, max_s=1e9, seed=4)
    draws = [sampler() for _ in range(N)]
    scale = 0.5 / 2 ** (1 / 1.5)
    assert sampler.quantile(0.5) == pytest.approx(0.5)
    assert _empirical(draws, p) == pytest.approx(scale * (1 - p) ** (-1 / 1.5), rel=0.06)
    assert min(draws) >= scale


def test_draws_are_seeded_and_capped():
    a = LatencySampler("pareto", median_s=1.0, alpha=0.5, max_s=3.0, seed=7)
    b = LatencySampler("pareto", median_s=1.0, alpha=0.5, max_s=3.0, seed=7)
    c = LatencySampler("pareto", median_s=1.0, alpha=0.5, max_s=3.0, seed=8)
    first, second, other = (
        [a() for _ in range(500)],
        [b() for _ in range(500)],
        [c() for _ in range(500)],
    )
    assert first == second and first != other
    assert max(first) == 3.0  # alpha 0.5: about a fifth of draws pass the cap


def test_off_draws_zero_and_the_config_builds_no_sampler():
    assert [LatencySampler("off", median_s=1.0)() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert env_latency(load_config("sao", None, []), seed=0) is None
    config = load_config(
        "sao", None, ["env.latency={distribution: lognormal, median_s: 0.3, sigma: 1.2, seed: 5}"]
    )
    sampler = env_latency(config, seed=2)
    reference = LatencySampler("lognormal", 0.3, sigma=1.2, seed=7)
    assert [sampler() for _ in range(5)] == [reference() for _ in range(5)]


def test_a_bare_off_turns_the_overlay_off_as_yaml_reads_it():
    on = ["env.latency={distribution: lognormal, median_s: 5.0}"]
    # YAML reads a bare `off` as false, meant as the overlay's "off"; `on` names no distribution.
    config = load_config("sao", None, [*on, "env.latency.distribution=off"])
    assert config.env.latency.distribution == "off"
    assert env_latency(config, seed=0) is None
    with pytest.raises(ValueError, match="env.latency.distribution"):
        load_config("sao", None, [*on, "env.latency.distribution=on"])


@pytest.mark.parametrize(
    "kwargs", [{"median_s": 0.0}, {"median_s": 1.0, "sigma": -1.0}, {"median_s": 1.0, "max_s": 0}]
)
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ValueError, match="env.latency"):
        LatencySampler("lognormal", **kwargs)


# ------------------------------------------------------------------ in the agent loop
class OneStepEnv(Environment):
    """Ends with reward 1 on its first step (one environment step per episode)."""

    stop_tags = ("</answer>",)

    def reset(self, task: Task) -> str:
        return task.prompt

    def step(self, action_text: str) -> StepResult:
        return StepResult("", 1.0, True, {"end_reason": "answer"})


class FakeClock:
    """Time moves only when the loop sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture(scope="module")
def parts():
    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    return build_tiny_policy(tokenizer, seed=0), tokenizer


TASK = Task(task_id="t", prompt="Q: 1+1=?\n", answer="2")


def _loop(parts, latency, env_workers, clock: FakeClock) -> AgentLoop:
    policy, tokenizer = parts
    return AgentLoop(
        RolloutEngine(policy, tokenizer, max_batch=8, seed=0),
        tokenizer,
        OneStepEnv,
        SamplingParams(max_new_tokens=4),
        max_tokens=200,
        env_name="one_step",
        env_workers=env_workers,
        env_latency=latency,
        clock=clock,
        sleep=clock.sleep,
    )


def _run(parts, latency, episodes, env_workers):
    clock = FakeClock()
    loop = _loop(parts, latency, env_workers, clock)
    for k in range(episodes):
        loop.start(f"e{k}", TASK, {"index": k})
    finished: list[tuple[float, str]] = []
    while loop.num_in_flight:
        finished += [
            (clock.now, t.metadata["task_id"] + str(t.metadata["index"])) for t in loop.step()
        ]
    loop.close()
    return clock, loop, finished


@pytest.mark.parametrize("env_workers", [0, 2])
def test_delayed_steps_of_different_episodes_overlap(parts, env_workers):
    clock, loop, finished = _run(parts, lambda: 1.0, episodes=4, env_workers=env_workers)
    # Four one-step episodes, each held back 1 s: all done after 1 s of waiting, not 4.
    assert len(finished) == 4
    assert sum(clock.slept) == pytest.approx(1.0)
    assert all(at == pytest.approx(1.0) for at, _ in finished)
    assert loop.env_latency_s == pytest.approx(4.0)


@pytest.mark.parametrize("env_workers", [0, 2])
def test_a_slow_step_holds_back_only_its_own_episode(parts, env_workers):
    draws = iter([5.0, 0.0, 0.0])
    clock, loop, finished = _run(parts, lambda: next(draws), episodes=3, env_workers=env_workers)
    times = sorted(at for at, _ in finished)
    # The other two finish long before the one drawn 5 s, which finishes after exactly 5 s
    # (inline, before any waiting at all; on threads, the tool threads may finish a moment later).
    limit = 0.0 if env_workers == 0 else 0.5
    assert all(at <= limit for at in times[:2])
    assert times[2] == pytest.approx(5.0)
    assert sum(clock.slept) == pytest.approx(5.0)
    assert all(s <= 0.05 + 1e-12 for s in clock.slept)


def test_the_configured_overlay_reaches_the_agent_loop(parts):
    from sao.rollout.setup import build_agent_loop

    policy, tokenizer = parts
    config = load_config(
        "sao", None, ["env.latency={distribution: pareto, median_s: 0.2, alpha: 2.0}"]
    )
    loop = build_agent_loop(config, policy, tokenizer, seed=3, for_training=False)
    reference = LatencySampler("pareto", 0.2, alpha=2.0, seed=3)
    assert [loop._env_latency() for _ in range(4)] == [reference() for _ in range(4)]
    loop.close()
    plain = build_agent_loop(load_config("sao", None, []), policy, tokenizer, seed=3)
    assert plain._env_latency is None
    plain.close()


def test_episodes_waiting_on_the_overlay_are_not_in_the_decode_batch(parts):
    clock, loop, finished = _run(parts, lambda: 5.0, episodes=3, env_workers=0)
    assert len(finished) == 3
    # Each episode decodes one action of at most 4 tokens, then waits 5 s in 50 ms sleeps
    # (100 loop steps with nothing at the engine): only the decoding steps count.
    assert 1 <= loop.decode_steps <= 4
    assert 1.0 <= loop.decoding_sum / loop.decode_steps <= 3.0
    assert len(clock.slept) >= 100


def test_a_paused_loop_keeps_its_waits_for_after_the_pause(parts):
    clock = FakeClock()
    loop = _loop(parts, lambda: 2.0, 0, clock)
    loop.start("e0", TASK, {"index": 0})
    while not loop._delayed:
        assert loop.step() == []
    held_at = clock.now
    loop.pause_waits()
    clock.now += 30.0  # an eval off the training clock
    loop.resume_waits()
    finished: list[float] = []
    while loop.num_in_flight:
        finished += [clock.now for _ in loop.step()]
    loop.close()
    # The 2 s wait ran down after the pause, not during it.
    assert finished == [pytest.approx(held_at + 30.0 + 2.0)]


def test_held_out_evals_leave_the_overlay_out_unless_asked(parts, monkeypatch):
    from sao.evaluation import held_out

    policy, tokenizer = parts
    built: list[bool] = []

    def build(config, model, tokenizer, **kwargs):
        built.append(kwargs["latency"])
        raise StopIteration  # the loop's settings are all this test reads

    monkeypatch.setattr(held_out, "build_agent_loop", build)
    overlay = "env.latency={distribution: lognormal, median_s: 5.0}"
    for in_evals in (False, True):
        config = load_config("sao", None, [overlay, f"env.latency.in_evals={in_evals}"])
        with pytest.raises(StopIteration):
            held_out.evaluate(policy, tokenizer, config, n=2, seed=0)
    assert built == [False, True]
