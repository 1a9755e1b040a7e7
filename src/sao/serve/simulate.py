"""`sao simulate`: a crowd of simulated users in front of a running `sao serve`.

Each user takes the next prompt of the environment's training stream (for `style_stream`, prompts
whose preferred style moves every `switch_every` prompts), asks the server through the official
`openai` client, has the environment's judge score the reply, and posts that score as feedback.
This is the online experiment through the real HTTP path: the server sees only prompts, replies
and single rewards.

The report reuses `style_stream`'s run hooks, with a window of `window` consecutive requests in
place of a learner step: style shares per window (the Figure-5-style plot), reward per window,
adaptation lag after each switch and each phase's closing reward.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from sao.envs import Task, make_env, make_task_source
from sao.envs.registry import registration_for
from sao.plumbing.durable import strict_dumps
from sao.runtime.plots import plot_metrics, save_run_report

SUPPORTED_ENVS = ("style_stream",)


@dataclass(frozen=True)
class _Scored:
    """What the environment's step-metrics hook reads from a trajectory: its `metadata["info"]`
    and its reward."""

    metadata: dict[str, Any] = field(default_factory=dict)
    reward: float = 0.0


def _fingerprint_version(fingerprint: str | None) -> int | None:
    if fingerprint and fingerprint.startswith("sao-v") and fingerprint[5:].isdigit():
        return int(fingerprint[5:])
    return None


class _User:
    """One request: ask, judge, reward. Shared clients are thread-safe."""

    def __init__(self, client: Any, http: httpx.Client, model: str, env: str) -> None:
        self.client = client
        self.http = http
        self.model = model
        self.env = env

    def run(self, index: int, task: Task) -> dict[str, Any]:
        t0 = time.perf_counter()
        reply = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": task.prompt}]
        )
        latency = time.perf_counter() - t0
        content = reply.choices[0].message.content or ""
        environment = make_env(self.env)
        environment.reset(task)
        result = environment.step(content)
        self._post_feedback(reply.id, result.reward)
        return {
            "index": index,
            "id": reply.id,
            "reward": result.reward,
            "style": result.info.get("style"),
            "preferred_style": task.meta.get("preferred_style"),
            "requested_style": task.meta.get("requested_style"),
            "policy_version": _fingerprint_version(reply.system_fingerprint),
            "latency_s": latency,
            "reply": content,
        }

    def _post_feedback(self, completion_id: str, reward: float, attempts: int = 8) -> None:
        """Post a reward, waiting out 429s as the server's `Retry-After` says."""
        for _ in range(attempts):
            response = self.http.post("/v1/feedback", json={"id": completion_id, "reward": reward})
            if response.status_code != 429:
                response.raise_for_status()
                return
            time.sleep(float(response.headers.get("retry-after", "1")))
        response.raise_for_status()


def settled_status(http: httpx.Client, timeout_s: float = 120.0) -> dict[str, Any]:
    """The server's status once its learner has trained every full batch of the rewards posted
    (or after `timeout_s`), so the summary's trained count is not a snapshot mid-step."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = http.get("/v1/status").json()
        learner = status.get("learner", {})
        settled = status.get("pending", 0) < learner.get("batch_size", 1) and not learner.get(
            "training"
        )
        if settled or time.monotonic() > deadline:
            return status
        time.sleep(0.5)


def window_rows(records: list[dict[str, Any]], window: int, env: str) -> list[dict[str, Any]]:
    """Per window of `window` consecutive requests (by prompt index): the environment's step
    metrics (style shares, preferred style), mean reward and mean served policy version."""
    registration = registration_for(env)
    ordered = sorted(records, key=lambda r: r["index"])
    rows = []
    for start in range(0, len(ordered), window):
        chunk = ordered[start : start + window]
        row: dict[str, Any] = {"step": start // window}
        if registration.step_metrics is not None:
            row.update(
                registration.step_metrics([_Scored({"info": r}, r["reward"]) for r in chunk])
            )
        row["rollout/reward_mean"] = sum(r["reward"] for r in chunk) / len(chunk)
        versions = [r["policy_version"] for r in chunk if r["policy_version"] is not None]
        row["serve/policy_version_mean"] = sum(versions) / len(versions) if versions else None
        rows.append(row)
    return rows


def simulate(
    url: str,
    api_key: str | None,
    env: str = "style_stream",
    requests: int = 256,
    concurrency: int = 4,
    switch_every: int | None = None,
    request_rate: float | None = None,
    window: int = 32,
    out: str | Path = "runs/simulate",
    seed: int = 0,
) -> dict[str, Any]:
    """Run `requests` simulated users, `concurrency` at a time; write the report into `out`.

    `switch_every` and `request_rate` (the share of users who name the preferred style outright)
    are the stream's task options; unset, the environment's own defaults (no requests).

    Raises:
        ValueError: an environment without simulated users, or a bad count.
    """
    import openai

    if env not in SUPPORTED_ENVS:
        hint = " (tool_calc's users are agents: pass --agent)" if env == "tool_calc" else ""
        raise ValueError(
            f"--env {env}: simulated users exist for {', '.join(SUPPORTED_ENVS)}{hint}"
        )
    for name, value in (("requests", requests), ("concurrency", concurrency), ("window", window)):
        if value < 1:
            raise ValueError(f"--{name}: must be >= 1, got {value}")
    if request_rate is not None and not 0.0 <= request_rate <= 1.0:
        raise ValueError(f"--request-rate: must be in [0, 1], got {request_rate}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    task_options: dict[str, Any] = {}
    if switch_every is not None:
        task_options["switch_every"] = switch_every
    if request_rate is not None:
        task_options["request_rate"] = request_rate
    stream = make_task_source(env, **task_options).stream("train", seed)
    tasks = list(itertools.islice(stream, requests))

    base = url.rstrip("/")
    client = openai.OpenAI(base_url=f"{base}/v1", api_key=api_key or "none", max_retries=8)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    records: list[dict[str, Any]] = []
    lock = threading.Lock()
    t0 = time.perf_counter()
    with (
        httpx.Client(base_url=base, headers=headers, timeout=120) as http,
        (out / "requests.jsonl").open("w") as log,
    ):
        model = client.models.list().data[0].id
        user = _User(client, http, model, env)

        def one(item: tuple[int, Task]) -> None:
            record = user.run(*item)
            with lock:
                records.append(record)
                log.write(strict_dumps(record) + "\n")
                log.flush()

        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(one, enumerate(tasks)))
        wall_s = time.perf_counter() - t0
        status = settled_status(http)

    rows = window_rows(records, window, env)
    (out / "windows.jsonl").write_text("".join(strict_dumps(r) + "\n" for r in rows))
    plot_metrics(rows, out / "plots", title=f"{status.get('preset', '')} served, per window:")
    run_report = registration_for(env).run_report
    summary: dict[str, Any] = {
        "url": base,
        "model": model,
        "preset": status.get("preset"),
        "requests": len(records),
        "concurrency": concurrency,
        "window": window,
        "wall_s": wall_s,
        "reward_mean": sum(r["reward"] for r in records) / len(records),
        "reward_by_window": [r["rollout/reward_mean"] for r in rows],
        "final_policy_version": status.get("policy_version"),
        "server_trained": status.get("trained"),
        "server_dropped": status.get("dropped"),
    }
    if run_report is not None:
        report = run_report(rows)
        summary.update(report.summary)
        save_run_report(report, rows, out / "plots", title=env)
    (out / "summary.json").write_text(strict_dumps(summary, indent=2) + "\n")
    return summary
