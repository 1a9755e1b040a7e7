"""Fast attention and experts kernels compute what the eager ones compute.

Each fast path (torch's `sdpa`, grouped-multiply experts, and those experts under bf16 autocast)
is compared with eager attention and eager experts on the same weights: log-probs and every
gradient in fp32 within 1e-4, log-probs under bf16 autocast within bf16 rounding. The learner
and the built-in engine are checked to run the fast kernels and, for the engine, to sample the
same tokens with the same recorded log-probs as an eager engine. The same comparisons run on
CUDA in bf16 where a GPU is present (skipped otherwise).
"""

from __future__ import annotations

import copy

import pytest
import torch
from test_learner import FAST_LR, make_trajectories, moe_policy

from sao.config import load_config
from sao.learner import Learner
from sao.learner.precision import prepare_model
from sao.models import build_tiny_policy, build_tokenizer, token_logprobs
from sao.models.critic import ValueModel
from sao.models.kernels import (
    AUTOCAST_GROUPED_MM,
    Kernels,
    _eager_experts_forward,
    fast_kernels_for,
    grouped_mm_runs_on,
    running_kernels,
    use_kernels,
)
from sao.rollout.engine import RolloutEngine, SamplingParams

TOKENIZER = build_tokenizer()
CPU = torch.device("cpu")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
needs_cpu_grouped_mm = pytest.mark.skipif(
    not grouped_mm_runs_on(CPU), reason="this torch has no CPU grouped multiply"
)


def fast_and_eager(device: torch.device = CPU) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The tiny policy on `device` with `auto` kernels, and a copy with eager ones."""
    fast = build_tiny_policy(TOKENIZER, seed=3).to(device)
    eager = copy.deepcopy(fast)
    use_kernels(fast, "auto")
    assert use_kernels(eager, "eager") == Kernels("eager", "eager")
    return fast, eager


def padded_batch(device: torch.device = CPU) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(1, len(TOKENIZER), (3, 48), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 30:] = 0
    mask[2, 11:] = 0
    return ids.to(device), mask.to(device)


def logprobs_and_grads(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, dtype: torch.dtype | None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    with torch.autocast(ids.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        logprobs = token_logprobs(model, ids, mask)
    (logprobs * mask).sum().backward()
    return logprobs.detach() * mask, {n: p.grad.clone() for n, p in model.named_parameters()}


@needs_cpu_grouped_mm
def test_auto_picks_sdpa_and_grouped_experts_on_cpu_and_eager_means_eager() -> None:
    fast, eager = fast_and_eager()
    assert running_kernels(fast).attention == "sdpa"
    assert running_kernels(fast).experts in (AUTOCAST_GROUPED_MM, "grouped_mm")
    assert running_kernels(eager) == Kernels("eager", "eager")
    # A second switch back is possible: the choice is not one-way.
    assert use_kernels(eager, "auto") == running_kernels(fast)


@needs_cpu_grouped_mm
def test_fast_kernels_give_the_eager_log_probs_and_gradients_in_fp32() -> None:
    fast, eager = fast_and_eager()
    ids, mask = padded_batch()
    fast_lp, fast_grads = logprobs_and_grads(fast, ids, mask, None)
    eager_lp, eager_grads = logprobs_and_grads(eager, ids, mask, None)

    torch.testing.assert_close(fast_lp, eager_lp, rtol=0, atol=1e-4)
    assert fast_grads.keys() == eager_grads.keys()
    for name, grad in eager_grads.items():
        torch.testing.assert_close(fast_grads[name], grad, rtol=1e-3, atol=1e-4, msg=name)
    # Every expert received gradient, so the grouped path really ran the experts.
    experts = [g for n, g in fast_grads.items() if "experts" in n]
    assert experts and all(g.abs().sum() > 0 for g in experts)


@needs_cpu_grouped_mm
def test_grouped_experts_under_bf16_autocast_compute_in_bf16_like_eager_ones() -> None:
    fast, eager = fast_and_eager()
    ids, mask = padded_batch()
    fast_lp, fast_grads = logprobs_and_grads(fast, ids, mask, torch.bfloat16)
    eager_lp, eager_grads = logprobs_and_grads(eager, ids, mask, torch.bfloat16)
    full_lp, _ = logprobs_and_grads(eager, ids, mask, None)

    # Both round to bf16; neither is fp32 (the gap to fp32 is bf16-sized, not zero).
    assert (fast_lp - eager_lp).abs().max() < 2e-2
    assert (fast_lp - full_lp).abs().max() > 1e-4
    # The master weights stay fp32 and get fp32 gradients pointing the eager way.
    assert {g.dtype for g in fast_grads.values()} == {torch.float32}
    flat_fast = torch.cat([g.flatten() for g in fast_grads.values()])
    flat_eager = torch.cat([eager_grads[n].flatten() for n in fast_grads])
    assert torch.nn.functional.cosine_similarity(flat_fast, flat_eager, dim=0) > 0.99


@needs_cpu_grouped_mm
def test_the_learner_runs_fast_kernels_and_steps_like_eager_ones() -> None:
    def step(kernels: str) -> tuple[Learner, dict[str, float]]:
        policy = moe_policy(0)
        config = load_config("sao", overrides=FAST_LR)
        run = Learner(policy, config, ValueModel.from_policy(policy))
        for model in (run.policy, run.critic):
            prepare_model(model, CPU, gradient_checkpointing=False, kernels=kernels)
        return run, run.step(make_trajectories(moe_policy(0), 4))

    fast, fast_metrics = step("auto")
    eager, eager_metrics = step("eager")

    # The packed rows keep `sao_packed` attention (sdpa per segment), so the experts differ.
    assert running_kernels(fast.policy).experts == fast_kernels_for(CPU).experts
    assert running_kernels(eager.policy).experts == "eager"
    for key in ("actor/pg_loss", "actor/entropy", "critic/vf_loss", "critic/values_mean"):
        assert fast_metrics[key] == pytest.approx(eager_metrics[key], rel=1e-4, abs=1e-6), key
    for (name, a), b in zip(
        fast.policy.state_dict().items(), eager.policy.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)


def test_a_learner_built_from_a_config_runs_the_device_kernels() -> None:
    policy = moe_policy(0)
    run = Learner(policy, load_config("sao"), ValueModel.from_policy(policy))
    # `sao_packed` attention is kept: it runs sdpa itself, one segment at a time.
    assert running_kernels(run.policy).experts == fast_kernels_for(CPU).experts
    assert running_kernels(run.critic).experts == fast_kernels_for(CPU).experts


def sample(engine: RolloutEngine) -> dict[str, tuple[list[int], list[float]]]:
    prompts = {f"r{i}": [TOKENIZER.bos_token_id, *range(5 + i, 12 + 2 * i)] for i in range(4)}
    for rid, ids in prompts.items():
        engine.submit(rid, ids, SamplingParams(temperature=1.0, max_new_tokens=12))
    done = {}
    while engine.has_work():
        for c in engine.step():
            done[c.request_id] = (c.token_ids, c.logprobs)
    return done


def compare_engines(device: torch.device, precision: str, tolerance: float) -> None:
    policy = build_tiny_policy(TOKENIZER, seed=1).to(device)
    fast = RolloutEngine(policy, TOKENIZER, max_batch=4, precision=precision, seed=7)
    eager = RolloutEngine(
        policy, TOKENIZER, max_batch=4, precision=precision, seed=7, kernels="eager"
    )
    assert running_kernels(fast._model) == fast_kernels_for(device)
    assert running_kernels(eager._model) == Kernels("eager", "eager")
    fast_out, eager_out = sample(fast), sample(eager)
    assert fast_out.keys() == eager_out.keys() == {f"r{i}" for i in range(4)}
    for rid, (tokens, logprobs) in eager_out.items():
        assert fast_out[rid][0] == tokens, rid
        assert (
            max(abs(a - b) for a, b in zip(fast_out[rid][1], logprobs, strict=True)) < tolerance
        ), rid


@needs_cpu_grouped_mm
def test_the_engine_samples_the_eager_tokens_and_log_probs_with_fast_kernels() -> None:
    compare_engines(CPU, "fp32", 1e-4)


@needs_cpu_grouped_mm
def test_the_eager_fallback_for_cuda_dtypes_is_the_experts_own_loop(monkeypatch) -> None:
    from transformers.integrations.moe import grouped_mm_experts_forward

    experts = build_tiny_policy(TOKENIZER, seed=2).model.layers[0].mlp.experts
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(10, 128, generator=gen)
    weights, index = torch.randn(10, 8, generator=gen).softmax(-1).topk(2, dim=-1)
    with torch.no_grad():
        grouped = grouped_mm_experts_forward(experts, hidden, index, weights)

        def refuse(*_):
            raise AssertionError("the fallback must not run the grouped multiply")

        monkeypatch.setattr("sao.models.kernels.grouped_mm_experts_forward", refuse)
        looped = _eager_experts_forward(experts, hidden, index, weights)
    torch.testing.assert_close(looped, grouped, rtol=1e-5, atol=1e-6)
    assert looped.abs().sum() > 0


def test_an_unknown_kernel_choice_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"^kernels: must be one of \['auto', 'eager'\], got 'x'$"):
        use_kernels(build_tiny_policy(TOKENIZER), "x")
    with pytest.raises(ValueError, match="kernels: must be one of"):
        RolloutEngine(build_tiny_policy(TOKENIZER), TOKENIZER, kernels="fast")


@needs_cuda
def test_on_cuda_fast_kernels_match_eager_in_bf16() -> None:
    cuda = torch.device("cuda")
    fast, eager = fast_and_eager(cuda)
    assert running_kernels(fast) == fast_kernels_for(cuda)
    ids, mask = padded_batch(cuda)
    fast_lp, fast_grads = logprobs_and_grads(fast, ids, mask, torch.bfloat16)
    eager_lp, eager_grads = logprobs_and_grads(eager, ids, mask, torch.bfloat16)
    assert (fast_lp - eager_lp).abs().max() < 2e-2
    flat_fast = torch.cat([g.flatten() for g in fast_grads.values()])
    flat_eager = torch.cat([eager_grads[n].flatten() for n in fast_grads])
    assert torch.nn.functional.cosine_similarity(flat_fast, flat_eager, dim=0) > 0.99


@needs_cuda
def test_on_cuda_the_engine_with_fast_kernels_matches_an_eager_one() -> None:
    compare_engines(torch.device("cuda"), "fp32", 1e-3)
