"""The HTTP API through real clients: the official `openai` package and `httpx`."""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from serve_helpers import STYLE_PROMPT, make_service, running_server, user

from sao.serve.auth import check_bind, resolve_api_key
from sao.serve.conversation import context_hash

KEY = "test-key-123"


@pytest.fixture(scope="module")
def server(policy_dir, tmp_path_factory):
    db = tmp_path_factory.mktemp("api") / "serve.db"
    # A batch size no test reaches keeps the learner idle: these tests are about the API.
    service = make_service(
        policy_dir, db, extra=["train.batch_size=64"], api_key=KEY, requests_per_minute=1000
    )
    with running_server(service) as url:
        yield url, service


@pytest.fixture()
def client(server):
    url, _ = server
    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)


@pytest.fixture()
def http(server):
    url, _ = server
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c


def test_openai_client_plain_completion(client, server):
    _, service = server
    reply = client.chat.completions.create(model="tiny-policy", messages=user())
    assert reply.id.startswith("chatcmpl-")
    assert reply.system_fingerprint == "sao-v0"
    assert len(reply.choices) == 1
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage.completion_tokens >= 1
    assert reply.usage.prompt_tokens == 1 + len(STYLE_PROMPT)  # BOS + one token per character
    stored = service.store.completion_by_context(
        context_hash([*user(), {"role": "assistant", "content": reply.choices[0].message.content}])
    )
    assert stored is not None and stored.id == reply.id
    trajectory = stored.trajectory
    actions = [i for i, m in enumerate(trajectory["action_mask"]) if m]
    assert len(actions) == reply.usage.completion_tokens
    assert all(trajectory["rollout_logprobs"][i] <= 0 for i in actions)
    assert all(trajectory["policy_versions"][i] == 0 for i in actions)


def test_openai_client_streamed_completion_matches_stored_reply(client, server):
    _, service = server
    stream = client.chat.completions.create(model="tiny-policy", messages=user(), stream=True)
    chunks = list(stream)
    ids = {c.id for c in chunks}
    assert len(ids) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish in (["stop"], ["length"])
    assert chunks[-1].system_fingerprint.startswith("sao-v")
    stored = service.store.completion_by_context(
        context_hash([*user(), {"role": "assistant", "content": text}])
    )
    assert stored is not None and stored.id == ids.pop()


def test_models_lists_the_policy_version(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny-policy"]
    assert models.data[0].model_extra["policy_version"] == 0


def test_n_above_one_is_refused(client):
    with pytest.raises(openai.BadRequestError, match="n: must be 1"):
        client.chat.completions.create(model="tiny-policy", messages=user(), n=2)


def test_feedback_statuses(client, http):
    reply = client.chat.completions.create(model="tiny-policy", messages=user())
    ok = http.post("/v1/feedback", json={"id": reply.id, "reward": 1.0})
    assert ok.status_code == 200
    assert ok.json() == {"id": reply.id, "status": "accepted"}
    assert http.post("/v1/feedback", json={"id": reply.id, "reward": 0.0}).status_code == 409
    assert http.post("/v1/feedback", json={"id": "chatcmpl-nope", "reward": 1}).status_code == 404
    for bad in (
        {"id": reply.id},
        {"id": reply.id, "reward": "1"},
        {"id": reply.id, "reward": None},
    ):
        response = http.post("/v1/feedback", json=bad)
        assert response.status_code == 422, bad
        assert "reward" in response.json()["error"]["message"]
    for raw in (b'{"id": "x", "reward": NaN}', b'{"id": "x", "reward": Infinity}'):
        response = http.post(
            "/v1/feedback", content=raw, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422


def test_status_counts(http):
    before = http.get("/v1/status").json()
    for key in ("policy_version", "completions", "feedback", "trained", "learner"):
        assert key in before
    assert "last_metrics" in before["learner"]
    http.post("/v1/chat/completions", json={"model": "tiny-policy", "messages": user()})
    after = http.get("/v1/status").json()
    assert after["completions"] == before["completions"] + 1


def test_metrics_is_prometheus_text(http):
    assert http.get("/v1/models").status_code == 200
    response = http.get("/metrics")
    assert response.status_code == 200
    assert "sao_serve_policy_version" in response.text
    assert 'sao_serve_stored{kind="completions"}' in response.text
    assert 'sao_serve_requests_total{endpoint="/v1/models",status="200"}' in response.text


def test_auth(server):
    url, _ = server
    assert httpx.get(f"{url}/health").status_code == 200
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        for path in ("/v1/models", "/v1/status", "/metrics"):
            assert httpx.get(f"{url}{path}", headers=headers).status_code == 401, (path, headers)
        response = httpx.post(f"{url}/v1/feedback", headers=headers, content=b"{not json")
        assert response.status_code == 401


def test_bad_bodies_get_400_or_422_never_500(http):
    raw = {"content-type": "application/json"}
    assert http.post("/v1/chat/completions", content=b"{oops", headers=raw).status_code == 400
    assert http.post("/v1/chat/completions", content=b"[1, 2]", headers=raw).status_code == 400
    cases = [
        {"model": "tiny-policy"},
        {"model": "tiny-policy", "messages": []},
        {"model": "tiny-policy", "messages": "hi"},
        {"model": "tiny-policy", "messages": [{"role": "robot", "content": "x"}]},
        {"model": "tiny-policy", "messages": [{"role": "user", "content": None}]},
        {"model": "tiny-policy", "messages": user(), "tools": [{"type": "function"}]},
        {"model": "tiny-policy", "messages": user(), "tool_choice": "always"},
        {"model": "tiny-policy", "messages": user(), "stream": "yes"},
        {"model": "tiny-policy", "messages": user(), "max_tokens": "4"},
        {"model": 7, "messages": user()},
    ]
    for body in cases:
        response = http.post("/v1/chat/completions", json=body)
        assert response.status_code == 422, body
        assert response.json()["error"]["message"]


def test_limits(http, server):
    _, service = server
    too_many = http.post(
        "/v1/chat/completions", json={"model": "tiny-policy", "messages": user(), "max_tokens": 9}
    )
    assert too_many.status_code == 400
    assert "max_tokens: at most 8" in too_many.json()["error"]["message"]
    long_prompt = http.post(
        "/v1/chat/completions", json={"model": "tiny-policy", "messages": user("x" * 200)}
    )
    assert long_prompt.status_code == 400
    assert "the limit is 160" in long_prompt.json()["error"]["message"]
    big = http.post("/v1/feedback", content=b"x" * (service.limits.max_body_bytes + 1))
    assert big.status_code == 413
    other_temperature = http.post(
        "/v1/chat/completions",
        json={"model": "tiny-policy", "messages": user(), "temperature": 0.5},
    )
    assert other_temperature.status_code == 400


def test_rate_limit_per_key(policy_dir, tmp_path):
    service = make_service(policy_dir, tmp_path / "rl.db", api_key=KEY, requests_per_minute=3)
    with running_server(service) as url:
        headers = {"Authorization": f"Bearer {KEY}"}
        codes = [httpx.get(f"{url}/v1/models", headers=headers).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        assert httpx.get(f"{url}/health").status_code == 200


def test_concurrency_limit_refuses_with_429(policy_dir, tmp_path):
    service = make_service(policy_dir, tmp_path / "cc.db", max_concurrent=1)
    assert service.gate.try_enter()  # one generation holds the only slot
    with running_server(service) as url:
        response = httpx.post(
            f"{url}/v1/chat/completions", json={"model": "tiny-policy", "messages": user()}
        )
        assert response.status_code == 429
        assert response.headers["retry-after"] == "1"
    service.gate.leave()


def test_no_key_refuses_non_loopback(monkeypatch):
    monkeypatch.delenv("SAO_API_KEY", raising=False)
    assert resolve_api_key(None) is None
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    with pytest.raises(ValueError, match="refusing to listen beyond loopback"):
        check_bind("0.0.0.0", None)
    monkeypatch.setenv("SAO_API_KEY", "from-env")
    assert resolve_api_key(None) == "from-env"
    assert resolve_api_key("flag") == "flag"
    check_bind("0.0.0.0", resolve_api_key(None))


def test_key_is_not_stored(client, server):
    _, service = server
    client.chat.completions.create(model="tiny-policy", messages=user())
    files = [p for p in service.store.path.parent.glob("serve.db*") if p.is_file()]
    stored = b"".join(p.read_bytes() for p in files)
    assert KEY.encode() not in stored
    assert service.key_id.encode() in stored  # the fingerprint stands in for it


def test_cli_refuses_to_bind_beyond_loopback_without_key(monkeypatch, capsys, policy_dir):
    from sao.cli import main

    monkeypatch.delenv("SAO_API_KEY", raising=False)
    assert main(["serve", "--model", policy_dir, "--host", "0.0.0.0"]) == 2
    assert "refusing to listen beyond loopback" in capsys.readouterr().err


def test_an_abandoned_stream_frees_its_generation_slot(server):
    url, service = server
    body = {"model": "tiny-policy", "messages": user(), "stream": True}
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200
        first = next(r.iter_lines())
        assert first.startswith("data: ")
    deadline = time.monotonic() + 30
    while service.gate.active and time.monotonic() < deadline:
        time.sleep(0.05)
    assert service.gate.active == 0
