"""Ray across nodes: two Ray nodes on this machine, the rollout actor on the one offering the
`engine` resource, the learner on the one offering `learner`, and `sao train --backend ray
--ray-address` completes a step. The run directory is written by the driver alone.

Slow (two Ray nodes and a training run take one to two minutes on two cores):
`python -m pytest -m slow tests/integration/test_ray_nodes.py`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import sao
from sao.models.policy import build_tiny_policy, save_policy
from sao.models.tokenizer import build_tokenizer
from small_run import SMALL_RUN

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="stops its cluster through /proc"),
]

RAY = str(Path(sys.executable).with_name("ray"))
SMALL = [
    *SMALL_RUN,
    "rollout.ray_resources={engine: 1}",
    "train.ray_learner_resources={learner: 1}",
]


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def node_ports(ports: list[int]) -> list[str]:
    names = (
        "--node-manager-port",
        "--object-manager-port",
        "--dashboard-agent-listen-port",
        "--dashboard-agent-grpc-port",
        "--metrics-export-port",
        "--runtime-env-agent-port",
    )
    return [f"{name}={port}" for name, port in zip(names, ports, strict=True)]


def stop_cluster(temp_dir: Path) -> None:
    """End the processes of this cluster only (those naming `temp_dir` on their command line,
    and their descendants), by pid: `ray stop` would end every Ray process on the machine."""
    table = _process_table()
    ours = {pid for pid, (_, cmdline) in table.items() if str(temp_dir) in cmdline}
    grew = True
    while grew:
        children = {pid for pid, (ppid, _) in table.items() if ppid in ours} - ours
        ours |= children
        grew = bool(children)
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
        for pid in ours:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(_running(pid) for pid in ours):
            time.sleep(0.2)


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line), from /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        table[int(entry.name)] = (ppid, cmdline)
    return table


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def two_nodes() -> Iterator[tuple[str, dict[str, str]]]:
    """A head node offering `engine` and a second node offering `learner`; yields the address
    and the environment the driver needs (auth token, the code under test on the path)."""
    temp_dir = Path(tempfile.mkdtemp(prefix="sao-ray-", dir="/tmp"))  # short: socket paths
    token = temp_dir / "token"
    token.write_text(secrets.token_hex(32))
    src = str(Path(sao.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    gcs, client, *ports = free_ports(14)
    address = f"127.0.0.1:{gcs}"
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", f"--temp-dir={temp_dir}"]
    head = [RAY, "start", "--head", f"--port={gcs}", f"--ray-client-server-port={client}"]
    head += ["--include-dashboard=false", "--resources", '{"engine": 1}']
    second = [RAY, "start", f"--address={address}", "--resources", '{"learner": 1}']
    try:
        for command, own in ((head, ports[:6]), (second, ports[6:12])):
            subprocess.run(
                [*command, *common, *node_ports(own)],
                env=env,
                check=True,
                capture_output=True,
                timeout=120,
            )
        yield address, env
    finally:
        stop_cluster(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_train_across_two_nodes_places_engine_and_learner_apart(two_nodes, tmp_path) -> None:
    address, env = two_nodes
    tokenizer = build_tokenizer()
    save_policy(build_tiny_policy(tokenizer, seed=0), tokenizer, tmp_path / "policy")
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "sao.cli", "train", "--backend", "ray"]
    command += ["--ray-address", address, "--steps", "1", "--out", str(run_dir)]
    command += ["--set", f"model.path={tmp_path / 'policy'}"]
    for override in SMALL:
        command += ["--set", override]
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]

    placement = json.loads((run_dir / "ray_nodes.json").read_text())
    nodes = placement["nodes"]
    assert len(nodes) == 2
    assert "engine" in nodes[placement["rollout"]]
    assert "learner" in nodes[placement["learner"]]
    assert placement["rollout"] != placement["learner"]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "actor/pg_loss" in r] == [1]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["trajectories_trained"] == 4
    logged = (run_dir / "trajectories.jsonl").read_text().splitlines()
    assert len(logged) == summary["trajectories_completed"] >= 4
    print(f"placement {json.dumps(placement)} in {time.monotonic() - started:.0f} s")
