"""`sao simulate --agent NAME`: a crowd of framework-written `tool_calc` agents in front of a
running `sao serve`.

The agents are the examples in `examples/agents/` (the plain `openai` tool loop, the OpenAI Agents
SDK, LangGraph), loaded from their files, so the crowd runs exactly the code a reader runs. Each
user is one episode: the agent calls the server (every call naming the episode in
`X-Episode-Id`), runs the `calculator` tool client-side, scores its final reply and posts the
episode's reward by episode id. The report has the shape of `sao simulate`'s: `requests.jsonl`
(one line per episode, in the order they finished), `windows.jsonl` (per window of `window`
consecutive episodes: reward, solved share, tool and model calls per episode, mean served
version), `summary.json` (with the server's status counts) and `plots/`.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from sao.plumbing.durable import strict_dumps
from sao.runtime.plots import plot_metrics

# `--agent` name -> the example file (in examples/agents/) that defines `run_episode`.
AGENT_FILES: dict[str, str] = {
    "openai": "openai_loop.py",
    "agents_sdk": "agents_sdk.py",
    "langgraph": "langgraph_agent.py",
}
AGENT_ENV = "tool_calc"

AGENT_PANELS: dict[str, tuple[str, list[str]]] = {
    "reward.png": ("reward per episode", ["rollout/reward_mean"]),
    "tool_calls.png": ("calls per episode", ["agent/tool_calls_mean", "agent/model_calls_mean"]),
    "policy_version.png": ("served policy version", ["serve/policy_version_mean"]),
}


def default_agents_dir() -> Path:
    """`examples/agents/` of the source tree this `sao` was imported from."""
    return Path(__file__).resolve().parents[3] / "examples" / "agents"


def load_agent(name: str, agents_dir: str | Path | None = None) -> ModuleType:
    """Import the example behind `--agent name`.

    Raises:
        ValueError: an unknown name, a missing examples directory, or a framework not installed.
    """
    if name not in AGENT_FILES:
        raise ValueError(f"--agent {name}: known agents are {', '.join(AGENT_FILES)}")
    directory = Path(agents_dir) if agents_dir is not None else default_agents_dir()
    path = directory / AGENT_FILES[name]
    if not path.is_file():
        raise ValueError(
            f"--agent {name}: {path} not found (the agents live in a source checkout's "
            "examples/agents/; pass --agents-dir)"
        )
    module_name = f"sao_agent_example_{path.stem}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as err:
        raise ValueError(
            f"--agent {name}: {err.name or err} is not installed (pip install -e '.[agents]')"
        ) from err
    sys.modules[module_name] = module
    return module


def agent_window_rows(records: list[dict[str, Any]], window: int) -> list[dict[str, Any]]:
    """Per window of `window` consecutive episodes (by task index): mean reward, solved share,
    tool and model calls per episode, mean served version (None when the agent hides it)."""
    ordered = sorted(records, key=lambda r: r["index"])
    rows = []
    for start in range(0, len(ordered), window):
        chunk = ordered[start : start + window]
        versions = [r["policy_version"] for r in chunk if r["policy_version"] is not None]
        rows.append(
            {
                "step": start // window,
                "episodes": len(chunk),
                "rollout/reward_mean": sum(r["reward"] for r in chunk) / len(chunk),
                "agent/solved_share": sum(r["solved"] for r in chunk) / len(chunk),
                "agent/tool_calls_mean": sum(r["tool_calls"] for r in chunk) / len(chunk),
                "agent/model_calls_mean": sum(r["model_calls"] for r in chunk) / len(chunk),
                "serve/policy_version_mean": sum(versions) / len(versions) if versions else None,
            }
        )
    return rows


def simulate_agents(
    url: str,
    api_key: str | None,
    agent: str,
    requests: int = 64,
    concurrency: int = 4,
    window: int = 16,
    out: str | Path = "runs/simulate_agents",
    seed: int = 0,
    max_turns: int = 4,
    agents_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Run `requests` episodes of the `agent` example, `concurrency` at a time; write the report.

    Raises:
        ValueError: an unknown or unloadable agent, or a bad count.
    """
    from sao.serve.simulate import settled_status

    for name, value in (
        ("requests", requests),
        ("concurrency", concurrency),
        ("window", window),
        ("max-turns", max_turns),
    ):
        if value < 1:
            raise ValueError(f"--{name}: must be >= 1, got {value}")
    module = load_agent(agent, agents_dir)
    common = sys.modules["agent_common"]
    base = url.rstrip("/")
    server = common.Server(base, api_key, common.served_model(base, api_key))
    tasks = common.tool_calc_tasks(requests, seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    records: list[dict[str, Any]] = []
    lock = threading.Lock()
    t0 = time.perf_counter()
    with (out / "requests.jsonl").open("w") as log:

        def record(index: int, result: Any) -> None:
            row = {"index": index, **asdict(result), "finished_s": time.perf_counter() - t0}
            with lock:
                records.append(row)
                log.write(strict_dumps(row) + "\n")
                log.flush()

        common.run_episodes(
            module.run_episode,
            tasks,
            server,
            prefix=f"sim-{agent}",
            max_turns=max_turns,
            concurrency=concurrency,
            on_result=record,
        )
    wall_s = time.perf_counter() - t0
    with httpx.Client(base_url=base, headers=server.auth_headers, timeout=120) as http:
        status = settled_status(http)

    rows = agent_window_rows(records, window)
    (out / "windows.jsonl").write_text("".join(strict_dumps(r) + "\n" for r in rows))
    plot_metrics(rows, out / "plots", title=f"{agent} agents, per window:", panels=AGENT_PANELS)
    episodes = len(records)
    summary: dict[str, Any] = {
        "url": base,
        "model": server.model,
        "agent": agent,
        "env": AGENT_ENV,
        "preset": status.get("preset"),
        "episodes": episodes,
        "concurrency": concurrency,
        "max_turns": max_turns,
        "window": window,
        "wall_s": wall_s,
        "reward_mean": sum(r["reward"] for r in records) / episodes,
        "solved_share": sum(r["solved"] for r in records) / episodes,
        "tool_calls": sum(r["tool_calls"] for r in records),
        "model_calls": sum(r["model_calls"] for r in records),
        "reward_by_window": [r["rollout/reward_mean"] for r in rows],
        "final_policy_version": status.get("policy_version"),
        "server_status": {k: v for k, v in status.items() if k != "learner"},
    }
    (out / "summary.json").write_text(strict_dumps(summary, indent=2) + "\n")
    return summary
