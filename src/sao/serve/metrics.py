"""Prometheus metrics of one server, in a registry of its own (several servers may share a process).

Names follow one namespace, `sao_serve_...`; the counters the store keeps (completions, episodes,
tool calls, feedback, trained, dropped, ...: `Store.counts`) are set from it, one `kind` label
each, so that they survive a restart.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServeMetrics:
    """The gauges, counters and histograms `/metrics` exposes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "sao_serve_requests",
            "HTTP requests by endpoint and status",
            ["endpoint", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "sao_serve_completion_seconds",
            "Time from request to the stored completion",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=r,
        )
        self.completion_tokens = Counter(
            "sao_serve_completion_tokens", "Tokens sampled for replies", registry=r
        )
        self.in_flight = Gauge("sao_serve_generations_in_flight", "Generations running", registry=r)
        self.policy_version = Gauge("sao_serve_policy_version", "Served weight version", registry=r)
        self.stored = Gauge(
            "sao_serve_stored",
            "Counters kept in the store, by kind (Store.counts: completions, episodes_started, "
            "tool_calls, feedback, trained, dropped, ...)",
            ["kind"],
            registry=r,
        )
        self.learner_steps = Counter(
            "sao_serve_learner_steps", "Learner steps by phase", ["phase"], registry=r
        )
        self.learner_seconds = Histogram(
            "sao_serve_learner_step_seconds", "Time of one learner step", registry=r
        )

    def set_counts(self, counts: dict[str, int]) -> None:
        for kind, value in counts.items():
            self.stored.labels(kind=kind).set(value)

    def render(self) -> bytes:
        return generate_latest(self.registry)
