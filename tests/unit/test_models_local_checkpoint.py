"""Any local HF checkpoint: a BPE tokenizer with a chat template, multi-token tool tags,
token-in/token-out across turns, and demonstrations laid out as rollouts are."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import pytest
import torch

from sao.config import SFTConfig
from sao.envs.registry import make_demonstrations, make_env, make_task_source, registration_for
from sao.formats.tags import ALL_TAGS
from sao.models.local_checkpoint import IM_END
from sao.models.policy import load_policy
from sao.models.tokenizer import build_tokenizer
from sao.rollout.agent_loop import AgentLoop
from sao.rollout.engine import RolloutEngine
from sao.rollout.rendering import TurnRenderer, single_token_ids
from sao.rollout.requests import Completion, SamplingParams
from sao.warmstart.sft import collate_demonstrations, sft_loss, warm_start

BUILT_IN_ENVS = ("calc", "code_repair", "style_stream", "tool_calc", "reasoning_gym:chain_sum")


@pytest.fixture(scope="module")
def moe(bpe_qwen3_moe_dir):
    return load_policy(bpe_qwen3_moe_dir)


class RecordingEngine:
    """Wraps an engine and records every submitted context and every finished completion."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.submitted: dict[str, list[list[int]]] = {}
        self.completed: dict[str, list[Completion]] = {}

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def submit(self, request_id, prompt_ids, params, stop_token_ids=(), stop_strings=()):
        self.submitted.setdefault(request_id, []).append(list(prompt_ids))
        self.engine.submit(request_id, prompt_ids, params, stop_token_ids, stop_strings)

    def step(self):
        done = self.engine.step()
        for completion in done:
            self.completed.setdefault(completion.request_id, []).append(completion)
        return done


class ScriptedEngine:
    """Emits the given actions' ids, in order, as if sampled (log-prob 0, version 0)."""

    version = 0
    is_paused = False

    def __init__(self, tokenizer, actions: Sequence[str]) -> None:
        self.queue = [tokenizer.encode(a, add_special_tokens=False) for a in actions]
        self.pending: list[str] = []

    def has_work(self) -> bool:
        return bool(self.pending)

    def submit(self, request_id, prompt_ids, params, stop_token_ids=(), stop_strings=()):
        self.pending.append(request_id)

    def step(self):
        out = []
        for request_id in self.pending:
            ids = self.queue.pop(0)
            out.append(Completion(request_id, ids, [0.0] * len(ids), [0] * len(ids), "stop"))
        self.pending = []
        return out


def test_local_checkpoint_is_bpe_with_chat_template_and_multi_token_tags(
    bpe_qwen3_moe_dir, bpe_qwen3_dense_dir
) -> None:
    for path, model_type in ((bpe_qwen3_moe_dir, "qwen3_moe"), (bpe_qwen3_dense_dir, "qwen3")):
        model, tokenizer = load_policy(path)
        assert model.config.model_type == model_type
        assert model.config.head_dim >= 32
        assert tokenizer.chat_template
        assert tokenizer.eos_token == IM_END
        for tag in ALL_TAGS:
            assert len(tokenizer.encode(tag, add_special_tokens=False)) > 1, tag
        assert single_token_ids(tokenizer, ["</python>"]) is None


def test_chat_layout_of_prompt_and_observation(moe) -> None:
    _, tokenizer = moe
    renderer = TurnRenderer(tokenizer)
    assert renderer.layout == "chat"
    prompt = tokenizer.decode(renderer.prompt_ids("What is 2+3?"))
    assert prompt == "<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"
    observation = tokenizer.decode(renderer.observation_ids("<output>5</output>"))
    assert observation == (
        "<|im_end|>\n<|im_start|>user\n<output>5</output><|im_end|>\n<|im_start|>assistant\n"
    )


def test_plain_layout_is_the_tiny_defaults_bos_then_text() -> None:
    tokenizer = build_tokenizer()
    renderer = TurnRenderer(tokenizer)
    assert renderer.layout == "plain"
    ids = tokenizer.encode("Q: 1+1?\n", add_special_tokens=False)
    assert renderer.prompt_ids("Q: 1+1?\n") == [tokenizer.bos_token_id, *ids]
    assert renderer.observation_ids("<output>2</output>") == tokenizer.encode(
        "<output>2</output>", add_special_tokens=False
    )
    assert single_token_ids(tokenizer, ["</python>", "</answer>"]) is not None


def test_a_template_that_rewrites_history_is_refused() -> None:
    tokenizer = build_tokenizer()
    tokenizer.chat_template = (
        "{% for m in messages %}{% if loop.last %}{{ m['role'] }}: {{ m['content'] }}\n"
        "{% endif %}{% endfor %}"
    )
    with pytest.raises(ValueError, match="chat template"):
        TurnRenderer(tokenizer)


def test_each_turn_extends_the_previous_turns_ids_exactly(moe) -> None:
    """Token-in/token-out on a BPE tokenizer over multi-turn calc episodes."""
    model, tokenizer = moe
    engine = RecordingEngine(RolloutEngine(model, tokenizer, max_batch=4, seed=0))
    loop = AgentLoop(
        engine,
        tokenizer,
        lambda: make_env("calc", max_turns=3),
        SamplingParams(max_new_tokens=12),
        400,
        "calc",
    )
    source = make_task_source("calc").stream("train", 0)
    tasks = [(f"e{i}", next(source), {}) for i in range(4)]
    trajectories = {t.metadata["task_id"]: t for t in loop.run(tasks)}
    assert len(trajectories) == 4
    multi_turn = 0
    renderer = TurnRenderer(tokenizer)
    for episode_id, task, _ in tasks:
        contexts = engine.submitted[episode_id]
        completions = engine.completed[episode_id]
        assert contexts[0] == renderer.prompt_ids(task.prompt)
        for before, completion, after in zip(contexts, completions, contexts[1:], strict=False):
            grown = before + completion.token_ids
            assert after[: len(grown)] == grown  # no re-tokenization of the history
            inserted = after[len(grown) :]
            assert tokenizer.decode(inserted).startswith(f"{IM_END}\n<|im_start|>user\n<output>")
        trajectory = trajectories[task.task_id]
        assert list(trajectory.token_ids) == contexts[-1] + completions[-1].token_ids
        sampled = [
            t for t, m in zip(trajectory.token_ids, trajectory.action_mask, strict=True) if m
        ]
        assert sampled == [t for c in completions for t in c.token_ids]
        recorded = [
            lp
            for lp, m in zip(trajectory.rollout_logprobs, trajectory.action_mask, strict=True)
            if m
        ]
        assert recorded == [lp for c in completions for lp in c.logprobs]
        multi_turn += len(contexts) >= 2
    assert multi_turn >= 2


@pytest.mark.parametrize("env_name", BUILT_IN_ENVS)
def test_teacher_episodes_through_the_loop_equal_their_demonstrations(moe, env_name) -> None:
    """Rollouts and demonstrations share one layout: each teacher's actions, played through the
    agent loop against the real environment, give exactly the ids `sao sft` trains on."""
    _, tokenizer = moe
    renderer = TurnRenderer(tokenizer)
    registration = registration_for(env_name)
    variant = [env_name.split(":")[1]] if registration.takes_variant else []
    teacher = registration.demonstrations(*variant, 40, 0)
    played = max(teacher[:40], key=lambda t: len(t.turns))  # the most turns: tools and answer
    demo = played.segments()
    actions = [text for text, is_action in demo if is_action]
    loop = AgentLoop(
        ScriptedEngine(tokenizer, actions),
        tokenizer,
        lambda: make_env(env_name, max_turns=len(actions)),
        SamplingParams(max_new_tokens=64),
        4096,
        env_name,
    )
    (trajectory,) = loop.run([("e", played.task, {})])
    ids, mask = renderer.demonstration(demo)
    assert list(trajectory.token_ids) == ids
    assert list(trajectory.action_mask) == mask
    assert trajectory.reward == played.reward  # the tools ran and the answer was scored the same


@pytest.mark.parametrize("env_name", BUILT_IN_ENVS)
def test_demonstrations_of_every_built_in_env_render_in_the_chat_layout(moe, env_name) -> None:
    _, tokenizer = moe
    renderer = TurnRenderer(tokenizer)
    for segments in make_demonstrations(env_name, 3, seed=0):
        ids, mask = renderer.demonstration(segments)
        assert len(ids) == len(mask)
        assert ids[: len(renderer.prompt_ids(segments[0][0]))] == renderer.prompt_ids(
            segments[0][0]
        )
        actions = "".join(text for text, is_action in segments if is_action)
        assert tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m]) == actions
        text = tokenizer.decode(ids)
        for observation in (text for text, is_action in segments[1:] if not is_action):
            assert f"<|im_start|>user\n{observation}{IM_END}\n<|im_start|>assistant\n" in text


def test_sft_warm_starts_a_local_checkpoint(bpe_qwen3_dense_dir, tmp_path) -> None:
    config = SFTConfig(steps=3, batch_size=4, warmup_steps=1, num_demonstrations=8)
    out = warm_start(
        "calc", tmp_path / "sft", config, progress=False, model_path=bpe_qwen3_dense_dir
    )
    model, tokenizer = load_policy(out)
    assert model.config.model_type == "qwen3"
    assert tokenizer.chat_template
    curve = [float(x) for x in (out / "sft_curve.txt").read_text().split()]
    assert len(curve) == 3 and all(torch.isfinite(torch.tensor(curve)))


def test_sft_loss_is_the_same_when_the_pad_id_also_occurs_in_the_text(moe) -> None:
    """A tokenizer padding with EOS (`<|im_end|>`, which the chat layout writes between turns)."""
    model, tokenizer = moe
    renderer = TurnRenderer(tokenizer)
    demos = make_demonstrations("calc", 6, seed=0)
    encoded = [renderer.demonstration(segments) for segments in demos]
    assert any(tokenizer.eos_token_id in ids for ids, _ in encoded)
    with torch.no_grad():
        losses = []
        for pad in (tokenizer.pad_token_id, tokenizer.eos_token_id):
            input_ids, loss_mask = collate_demonstrations(encoded, pad)
            losses.append(sft_loss(model, input_ids, loss_mask, pad).item())
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


def test_a_tokenizer_without_a_pad_token_pads_with_eos(moe, tmp_path) -> None:
    model, tokenizer = moe
    no_pad = copy.deepcopy(tokenizer)
    no_pad.pad_token = None
    model.save_pretrained(tmp_path)
    no_pad.save_pretrained(tmp_path)
    _, loaded = load_policy(tmp_path)
    assert loaded.pad_token_id == loaded.eos_token_id == tokenizer.eos_token_id
