"""`sao serve` under load: requests/s and p50/p99 latency while the learner trains vs. idle.

One server (in this process, uvicorn on a loopback port, a fresh tiny policy unless `--model` is
given) and `--concurrency` clients sending chat completions. Rounds alternate on the same server:

    idle   completions only; no feedback is posted, so the learner has nothing to train
    train  the previous idle round's completions are rewarded first (a backlog of batches), so
           the learner trains and publishes weights while this round's requests are served

Alternating rounds keep slow drifts of the machine out of the ratio. The learner's busy share of
each train round (seconds spent in learner steps / round wall time) is printed, so the overlap is
measured, not assumed. Training changes the policy and with it the length of its replies, so
reply tokens/s is printed beside requests/s.

    python benchmarks/serve.py [--rounds 2] [--requests 48] [--concurrency 4] [--batch-size 4]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import uvicorn

from sao.config import load_config
from sao.models.policy import build_tiny_policy, save_policy
from sao.models.tokenizer import build_tokenizer
from sao.serve.app import create_app
from sao.serve.limits import Limits
from sao.serve.service import build_service

PROMPT = "Styles: cute, chuunibyou, classical, pirate.\nWrite one line about the sea.\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_round(url: str, model: str, n: int, concurrency: int, max_tokens: int) -> dict:
    """`n` completions from `concurrency` clients; latencies and the completion ids."""
    latencies: list[float] = []
    ids: list[str] = []
    tokens: list[int] = []
    lock = threading.Lock()

    def one(_: int) -> None:
        t0 = time.perf_counter()
        response = httpx.post(
            f"{url}/v1/chat/completions",
            json={
                "model": model,
                "messages": [{"role": "user", "content": PROMPT}],
                "max_tokens": max_tokens,
            },
            timeout=300,
        )
        response.raise_for_status()
        with lock:
            latencies.append(time.perf_counter() - t0)
            ids.append(response.json()["id"])
            tokens.append(response.json()["usage"]["completion_tokens"])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(n)))
    wall = time.perf_counter() - t0
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "requests_per_s": n / wall,
        "tokens_per_s": sum(tokens) / wall,
        "reply_tokens_mean": sum(tokens) / n,
        "p50_s": statistics.median(latencies),
        "p99_s": cuts[98],
        "wall_s": wall,
        "ids": ids,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="saved policy directory (default: a fresh tiny policy)")
    parser.add_argument("--rounds", type=int, default=2, help="idle/train round pairs")
    parser.add_argument("--requests", type=int, default=48, help="requests per round")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=4, help="feedback per learner step")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--json", dest="json_path", help="also write the results as JSON")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="sao-serve-bench-"))
    model_path = args.model
    if model_path is None:
        tokenizer = build_tokenizer()
        model_path = str(work / "tiny-policy")
        save_policy(build_tiny_policy(tokenizer, seed=0), tokenizer, model_path)
    config = load_config(
        "sao",
        None,
        [
            "env.name=style_stream",
            f"train.batch_size={args.batch_size}",
            f"rollout.max_new_tokens={args.max_tokens}",
        ],
    )
    limits = Limits(
        max_tokens_cap=args.max_tokens, max_concurrent=args.concurrency, requests_per_minute=10**6
    )
    service = build_service(config, model_path, work / "serve.db", None, limits, warmup_batches=1)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    url, model = f"http://127.0.0.1:{port}", service.model_name

    results: dict[str, list[dict]] = {"idle": [], "train": []}
    backlog: list[str] = []
    try:
        run_round(url, model, args.concurrency * 2, args.concurrency, args.max_tokens)  # warm-up
        for _ in range(args.rounds):
            idle = run_round(url, model, args.requests, args.concurrency, args.max_tokens)
            results["idle"].append(idle)
            backlog = idle["ids"]
            for completion_id in backlog:
                httpx.post(
                    f"{url}/v1/feedback", json={"id": completion_id, "reward": 1.0}, timeout=60
                ).raise_for_status()
            busy_before = service.live.busy_s
            train = run_round(url, model, args.requests, args.concurrency, args.max_tokens)
            # Steps count when they end, so one that ends just after the round is left out.
            train["learner_busy_share"] = (service.live.busy_s - busy_before) / train["wall_s"]
            results["train"].append(train)
            while service.store.pending_count() >= args.batch_size:  # next idle round is idle
                time.sleep(0.1)
            time.sleep(0.5)
    finally:
        server.should_exit = True
        thread.join(timeout=60)

    def mean(kind: str, key: str) -> float:
        return statistics.fmean(r[key] for r in results[kind])

    idle_rps, train_rps = mean("idle", "requests_per_s"), mean("train", "requests_per_s")
    rows = [
        ("requests/s", idle_rps, train_rps, train_rps / idle_rps),
        ("reply tokens/s", mean("idle", "tokens_per_s"), mean("train", "tokens_per_s"), None),
        (
            "reply length",
            mean("idle", "reply_tokens_mean"),
            mean("train", "reply_tokens_mean"),
            None,
        ),
        ("p50 latency (s)", mean("idle", "p50_s"), mean("train", "p50_s"), None),
        ("p99 latency (s)", mean("idle", "p99_s"), mean("train", "p99_s"), None),
    ]
    print(
        f"sao serve, tiny policy, {args.concurrency} clients, max_tokens {args.max_tokens}, "
        f"{args.rounds} x {args.requests} requests per state, learner batch {args.batch_size}"
    )
    print(f"{'':18s}{'idle':>10s}{'training':>10s}{'train/idle':>12s}")
    for name, idle_value, train_value, ratio in rows:
        ratio = ratio if ratio is not None else train_value / idle_value
        print(f"{name:18s}{idle_value:10.3f}{train_value:10.3f}{ratio:12.2f}")
    busy = mean("train", "learner_busy_share")
    steps = service.live.seq
    print(f"learner busy during training rounds: {busy:.0%} of wall time; {steps} learner steps")
    if args.json_path:
        for kind in results:
            for r in results[kind]:
                r.pop("ids", None)
        Path(args.json_path).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
