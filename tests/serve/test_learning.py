"""Learning live and sessions, in-process (FastAPI's TestClient; no network client needed)."""

from __future__ import annotations

import torch
from fastapi.testclient import TestClient
from serve_helpers import make_service, user, wait_for_status

from sao.serve.app import create_app
from sao.serve.conversation import context_hash


def _complete(client, messages):
    response = client.post(
        "/v1/chat/completions", json={"model": "tiny-policy", "messages": messages}
    )
    assert response.status_code == 200, response.text
    return response.json()


def _reward(client, completion_id, reward):
    response = client.post("/v1/feedback", json={"id": completion_id, "reward": reward})
    assert response.status_code == 200, response.text


def test_feedback_trains_critic_first_then_publishes_new_weights(policy_dir, tmp_path):
    service = make_service(policy_dir, tmp_path / "s.db", warmup=1)
    engine_before = {k: v.clone() for k, v in service.worker.engine._model.state_dict().items()}
    with TestClient(create_app(service)) as client:
        for reward in (1.0, 0.0):
            _reward(client, _complete(client, user())["id"], reward)
        status = wait_for_status(client, lambda s: s["trained"] == 2)
        assert status["policy_version"] == 0  # the first batch trains the critic only
        assert status["learner"]["warmup_batches_done"] == 1
        assert "critic/vf_loss" in status["learner"]["last_metrics"]

        for reward in (1.0, 0.0):
            _reward(client, _complete(client, user())["id"], reward)
        status = wait_for_status(client, lambda s: s["trained"] == 4)
        assert status["policy_version"] == 1
        assert "actor/grad_norm" in status["learner"]["last_metrics"]
        assert client.get("/v1/models").json()["data"][0]["policy_version"] == 1
        assert _complete(client, user())["system_fingerprint"] == "sao-v1"
    engine_after = service.worker.engine._model.state_dict()
    assert any(not torch.equal(engine_before[k], engine_after[k]) for k in engine_before)


def test_staleness_limit_drops_and_counts_late_feedback(policy_dir, tmp_path):
    service = make_service(
        policy_dir, tmp_path / "s.db", extra=["rollout.max_staleness=0"], warmup=0
    )
    with TestClient(create_app(service)) as client:
        late = _complete(client, user())["id"]  # sampled at version 0, rewarded after version 1
        for reward in (1.0, 0.0):
            _reward(client, _complete(client, user())["id"], reward)
        wait_for_status(client, lambda s: s["policy_version"] == 1)
        _reward(client, late, 1.0)
        _reward(client, _complete(client, user())["id"], 1.0)
        status = wait_for_status(client, lambda s: s["dropped"] == 1)
        assert status["trained"] == 3
        assert status["learner"]["last_metrics"]["rollout/dropped_stale"] == 1.0


def test_late_feedback_without_a_limit_is_trained(policy_dir, tmp_path):
    service = make_service(policy_dir, tmp_path / "s.db", warmup=0)
    with TestClient(create_app(service)) as client:
        late = _complete(client, user())["id"]
        for reward in (1.0, 0.0):
            _reward(client, _complete(client, user())["id"], reward)
        wait_for_status(client, lambda s: s["policy_version"] == 1)
        _reward(client, late, 1.0)
        _reward(client, _complete(client, user())["id"], 0.0)
        status = wait_for_status(client, lambda s: s["trained"] == 4)
        assert status["dropped"] == 0
        assert status["learner"]["last_metrics"]["rollout/staleness_max"] == 1.0


def test_continued_conversation_extends_the_trajectory(policy_dir, tmp_path):
    service = make_service(policy_dir, tmp_path / "s.db", extra=["train.batch_size=64"])
    with TestClient(create_app(service)) as client:
        first = _complete(client, user())
        reply = first["choices"][0]["message"]["content"]
        history = [*user(), {"role": "assistant", "content": reply}]
        follow_up = {"role": "user", "content": "Shorter, please."}
        second = _complete(client, [*history, follow_up])
        assert second["parent_id"] == first["id"]
        unrelated = _complete(client, [*user("Write one line about rain.\n"), follow_up])
        assert unrelated["parent_id"] is None

        parent = service.store.completion_by_context(context_hash(history))
        child_history = [
            *history,
            follow_up,
            {"role": "assistant", "content": second["choices"][0]["message"]["content"]},
        ]
        child = service.store.completion_by_context(context_hash(child_history))
        p, c = parent.trajectory, child.trajectory
        n = len(p["token_ids"])
        for field in ("token_ids", "action_mask", "rollout_logprobs", "policy_versions"):
            assert c[field][:n] == p[field][:n]
        assert len(c["turn_spans"]) == 2 and c["turn_spans"][0] == p["turn_spans"][0]
        observation = range(n, c["turn_spans"][1][0])
        assert len(observation) == len(follow_up["content"]) + 1  # the text and its newline
        assert all(c["action_mask"][i] == 0 for i in observation)
        assert all(c["action_mask"][i] == 1 for i in range(*c["turn_spans"][1]))
        assert second["usage"]["prompt_tokens"] == c["turn_spans"][1][0]
