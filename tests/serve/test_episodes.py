"""Episodes (`X-Episode-Id`): calls continue one trajectory, one reward trains it once, an edited
history restarts it, an episode left without a reward is dropped, and one whose tool or
environment failed is recorded and never trained; all counted."""

from __future__ import annotations

import sqlite3
import time

from fastapi.testclient import TestClient
from serve_helpers import make_service, user, wait_for_status

from sao.serve.app import create_app


def _call(client, messages, episode, status=200):
    response = client.post(
        "/v1/chat/completions",
        json={"model": "tiny-policy", "messages": messages},
        headers={"X-Episode-Id": episode},
    )
    assert response.status_code == status, response.text
    return response.json()


def _reply(completion):
    return completion["choices"][0]["message"]


def test_an_episode_is_one_trajectory_rewarded_and_trained_once(policy_dir, tmp_path):
    service = make_service(policy_dir, tmp_path / "s.db", extra=["train.batch_size=1"], warmup=1)
    with TestClient(create_app(service)) as client:
        first = _call(client, user(), "ep-1")
        follow_up = [*user(), _reply(first), {"role": "user", "content": "Again."}]
        second = _call(client, follow_up, "ep-1")
        assert second["parent_id"] == first["id"] and second["episode_id"] == "ep-1"

        by_id = client.post("/v1/feedback", json={"id": first["id"], "reward": 1.0})
        assert by_id.status_code == 409
        assert by_id.json()["error"]["code"] == "completion_in_episode"
        accepted = client.post("/v1/feedback", json={"episode_id": "ep-1", "reward": 1.0})
        assert accepted.status_code == 200
        assert accepted.json() == {"episode_id": "ep-1", "id": second["id"], "status": "accepted"}
        again = client.post("/v1/feedback", json={"episode_id": "ep-1", "reward": 0.0})
        assert again.status_code == 409 and again.json()["error"]["code"] == "episode_closed"
        status = wait_for_status(client, lambda s: s["trained"] == 1)
        assert _call(client, [*follow_up, _reply(second), *user()], "ep-1", 409)
        parent = service.store.completion(first["id"]).trajectory
        rewarded = service.store.completion(second["id"]).trajectory
    assert {k: status[k] for k in ("feedback", "trained", "pending", "continued")} == {
        "feedback": 1,
        "trained": 1,
        "pending": 0,
        "continued": 1,
    }
    assert (status["episodes_started"], status["episodes_rewarded"], status["episodes_open"]) == (
        1,
        1,
        0,
    )
    # The one trained trajectory holds both turns: the first call's ids, then the second's.
    n = len(parent["token_ids"])
    assert rewarded["token_ids"][:n] == parent["token_ids"]
    assert len(rewarded["turn_spans"]) == 2


def test_an_edited_history_restarts_the_episode_and_the_latest_trajectory_is_rewarded(
    policy_dir, tmp_path
):
    service = make_service(policy_dir, tmp_path / "s.db", extra=["train.batch_size=64"])
    with TestClient(create_app(service)) as client:
        first = _call(client, user(), "ep-2")
        edited = {"role": "assistant", "content": "<answer>something else</answer>"}
        second = _call(client, [*user(), edited, {"role": "user", "content": "Again."}], "ep-2")
        assert second["parent_id"] is None
        accepted = client.post("/v1/feedback", json={"episode_id": "ep-2", "reward": 0.5})
        assert accepted.json()["id"] == second["id"]
        status = client.get("/v1/status").json()
        restarted = service.store.completion(second["id"])
    assert (status["restarted"], status["trajectories_abandoned"], status["continued"]) == (1, 1, 0)
    assert first["id"] != second["id"]
    # The restarted trajectory renders the whole edited history as context, nothing trained in it.
    start = restarted.trajectory["turn_spans"][0][0]
    assert restarted.trajectory["action_mask"][:start] == [0] * start


def test_an_episode_without_a_reward_in_time_is_dropped_and_counted(policy_dir, tmp_path):
    service = make_service(
        policy_dir,
        tmp_path / "s.db",
        extra=["train.batch_size=64", "serve.episode_timeout_s=0.001"],
    )
    with TestClient(create_app(service)) as client:
        _call(client, user(), "ep-3")
        time.sleep(0.01)  # longer than the timeout
        late = client.post("/v1/feedback", json={"episode_id": "ep-3", "reward": 1.0})
        assert late.status_code == 409
        assert "dropped" in late.json()["error"]["message"]
        _call(client, user(), "ep-3", 409)
        status = client.get("/v1/status").json()
        metrics = client.get("/metrics").text
    assert (status["episodes_dropped"], status["feedback"], status["episodes_open"]) == (1, 0, 0)
    assert 'sao_serve_stored{kind="episodes_dropped"} 1.0' in metrics


def test_episode_requests_that_cannot_be_served_are_refused(policy_dir, tmp_path):
    service = make_service(policy_dir, tmp_path / "s.db", extra=["train.batch_size=64"])
    with TestClient(create_app(service)) as client:
        assert _call(client, user(), "   ", 400)
        for body in ({"reward": 1.0}, {"id": "a", "episode_id": "b", "reward": 1.0}):
            response = client.post("/v1/feedback", json=body)
            assert response.status_code == 422
            assert "exactly one of id" in response.json()["error"]["message"]
        unknown = client.post("/v1/feedback", json={"episode_id": "nope", "reward": 1.0})
        assert unknown.status_code == 404


def test_a_failed_tool_or_environment_is_answered_recorded_and_never_trained(policy_dir, tmp_path):
    db = tmp_path / "s.db"
    service = make_service(policy_dir, db, extra=["train.batch_size=1"], warmup=1)
    with TestClient(create_app(service)) as client:
        failed = _call(client, user(), "ep-tool-failed")  # the client still gets its reply
        assert _reply(failed)["role"] == "assistant"
        report = client.post(
            "/v1/feedback",
            json={"episode_id": "ep-tool-failed", "env_error": "calculator: ConnectionError"},
        )
        assert report.status_code == 200, report.text
        assert report.json() == {
            "episode_id": "ep-tool-failed",
            "id": failed["id"],
            "status": "env_error",
        }
        late = client.post("/v1/feedback", json={"episode_id": "ep-tool-failed", "reward": 1.0})
        assert late.status_code == 409 and "(env_error)" in late.json()["error"]["message"]
        _call(client, user(), "ep-tool-failed", 409)

        lone = client.post(
            "/v1/chat/completions", json={"model": "tiny-policy", "messages": user("Hi.")}
        ).json()
        lone_report = client.post("/v1/feedback", json={"id": lone["id"], "env_error": "judge"})
        assert lone_report.json() == {"id": lone["id"], "status": "env_error"}
        assert (
            client.post("/v1/feedback", json={"id": lone["id"], "reward": 1.0}).status_code == 409
        )

        good = _call(client, user(), "ep-good")
        client.post("/v1/feedback", json={"episode_id": "ep-good", "reward": 1.0})
        status = wait_for_status(client, lambda s: s["trained"] == 1)
        metrics = client.get("/metrics").text
    assert (status["env_errors"], status["feedback"], status["pending"]) == (2, 1, 0)
    assert 'sao_serve_stored{kind="env_errors"} 2.0' in metrics
    with sqlite3.connect(db) as read:
        rows = dict(
            (cid, (state, error))
            for cid, state, error in read.execute(
                "SELECT completion_id, state, error FROM feedback"
            )
        )
        episodes = dict(read.execute("SELECT id, state FROM episodes"))
    assert rows == {
        failed["id"]: ("env_error", "calculator: ConnectionError"),
        lone["id"]: ("env_error", "judge"),
        good["id"]: ("trained", None),
    }
    assert episodes == {"ep-tool-failed": "env_error", "ep-good": "rewarded"}


def test_feedback_is_a_reward_or_an_env_error_not_both(policy_dir, tmp_path):
    service = make_service(policy_dir, tmp_path / "s.db", extra=["train.batch_size=64"])
    with TestClient(create_app(service)) as client:
        _call(client, user(), "ep-4")
        for body in (
            {"episode_id": "ep-4"},
            {"episode_id": "ep-4", "reward": None},
            {"episode_id": "ep-4", "reward": 1.0, "env_error": "x"},
        ):
            response = client.post("/v1/feedback", json=body)
            assert response.status_code == 422, body
            assert "exactly one of reward" in response.json()["error"]["message"]
        blank = client.post("/v1/feedback", json={"episode_id": "ep-4", "env_error": ""})
        assert blank.status_code == 422 and "env_error" in blank.json()["error"]["message"]
