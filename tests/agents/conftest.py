"""One real `sao serve` process for the agent tests, serving a short `tool_calc` warm start.

The warm start is `sao sft --env tool_calc` for `SFT_STEPS` steps: enough that the tiny model
writes parseable `<tool>` calls and `<answer>` tags most of the time (it rarely gets the answer
right, which the tests do not need). The server learns while the tests run, `BATCH` rewards a
step, so every test reads counts as differences of `/v1/status` around what it sent.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from agents_helpers import BATCH, LiveServer, free_port, subprocess_env

# Measured with `sao eval --env tool_calc --n 60` on the result: 100 steps of 32 demonstrations
# (30 to 80 s here, by the load on the cores) call the tool in 0.75 of episodes with 0.20 format errors; 60 steps only 0.37.
SFT_STEPS = 100


@pytest.fixture(scope="session")
def warm_start(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("agents") / "warm_start_tool_calc"
    command = [
        sys.executable, "-m", "sao.cli", "sft", "--env", "tool_calc", "--steps", str(SFT_STEPS),
        "--out", str(out), "--set", "sft.batch_size=32", "--set", "sft.lr=5e-3",
        "--set", "sft.warmup_steps=5", "--set", "sft.num_demonstrations=2000",
    ]  # fmt: skip
    done = subprocess.run(command, env=subprocess_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return str(out)


@pytest.fixture(scope="session")
def live_server(warm_start, tmp_path_factory) -> Iterator[LiveServer]:
    """`sao serve` on a free loopback port, no key; killed at the end of the session."""
    root = tmp_path_factory.mktemp("agents_server")
    port = free_port()
    command = [
        sys.executable, "-m", "sao.cli", "serve", "--model", warm_start, "--env", "tool_calc",
        "--db", str(root / "serve.db"), "--port", str(port), "--warmup-batches", "1",
        "--set", f"train.batch_size={BATCH}", "--requests-per-minute", "6000",
    ]  # fmt: skip
    log = root / "server.log"
    process = subprocess.Popen(
        command, env=subprocess_env(), stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "sao serve did not come up"
            time.sleep(0.1)
        model = httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]
        yield LiveServer(url, model, log)
    finally:
        process.kill()
        process.wait()
