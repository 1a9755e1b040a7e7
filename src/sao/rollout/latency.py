"""The environment-latency overlay: a long-tailed extra time added to every environment step.

Real sandboxes and agent scaffolds take from milliseconds to minutes per tool call, with a long
tail; the built-in environments answer in microseconds. `env.latency` makes each `reset`-free
environment step (every tool call or answer check) wait an extra time drawn from a seeded
distribution, so the premise of single-rollout training (long, uneven episodes) can be measured
on any environment. The wait is applied in one place, the agent loop (`sao.rollout.agent_loop`):
an episode whose step is delayed is simply not resubmitted until its time is up, so the engine
keeps decoding every other episode meanwhile and no environment thread is held by the wait.

Distributions, each named by its median `m` (seconds):

- `lognormal`: `m * exp(sigma * Z)`, Z standard normal; the p-quantile is
  `m * exp(sigma * Phi^-1(p))`.
- `pareto`: type I with tail index `alpha` and scale `x_m = m / 2^(1/alpha)`; the p-quantile is
  `x_m * (1 - p)^(-1/alpha)` (alpha <= 2: infinite variance; alpha <= 1: infinite mean).

Every draw is capped at `max_s` so one sample cannot stall a run forever. `off` draws nothing.
"""

from __future__ import annotations

import math
import random
from statistics import NormalDist
from typing import Literal

Distribution = Literal["off", "lognormal", "pareto"]


class LatencySampler:
    """Seeded draws of the extra seconds one environment step takes.

    Args:
        distribution: `off` (always 0), `lognormal` or `pareto`.
        median_s: the distribution's median in seconds (> 0).
        sigma: lognormal shape (> 0).
        alpha: Pareto tail index (> 0).
        max_s: cap on a single draw (> 0).
        seed: the draws' seed; the same seed gives the same sequence.
    """

    def __init__(
        self,
        distribution: Distribution,
        median_s: float,
        sigma: float = 1.0,
        alpha: float = 1.5,
        max_s: float = 60.0,
        seed: int = 0,
    ) -> None:
        if distribution not in ("off", "lognormal", "pareto"):
            raise ValueError(f"env.latency.distribution: unknown {distribution!r}")
        for name, value in (("median_s", median_s), ("sigma", sigma), ("alpha", alpha)):
            if not value > 0:
                raise ValueError(f"env.latency.{name}: must be > 0, got {value}")
        if not max_s > 0:
            raise ValueError(f"env.latency.max_s: must be > 0, got {max_s}")
        self.distribution = distribution
        self.median_s, self.sigma, self.alpha, self.max_s = median_s, sigma, alpha, max_s
        self._rng = random.Random(seed)

    @property
    def enabled(self) -> bool:
        return self.distribution != "off"

    def quantile(self, p: float) -> float:
        """The uncapped p-quantile (0 < p < 1) of the distribution; 0 when off."""
        if not 0.0 < p < 1.0:
            raise ValueError(f"quantile: p must be in (0, 1), got {p}")
        if self.distribution == "lognormal":
            return self.median_s * math.exp(self.sigma * NormalDist().inv_cdf(p))
        if self.distribution == "pareto":
            scale = self.median_s / 2.0 ** (1.0 / self.alpha)
            return scale * (1.0 - p) ** (-1.0 / self.alpha)
        return 0.0

    def __call__(self) -> float:
        """One draw in seconds, at most `max_s` (0.0 when off, and the seed is not consumed)."""
        if self.distribution == "off":
            return 0.0
        # Inverse-CDF sampling keeps one uniform per draw, so both distributions share the stream.
        u = self._rng.random()
        while u == 0.0:
            u = self._rng.random()
        return min(self.max_s, self.quantile(u))
