"""The Python stages of `scripts/gpu_check.sh`; each prints one `ROW <stage> | <figures>` line.

    python scripts/gpu_check.py build-model OUT [--toy]
    python scripts/gpu_check.py learner MODEL --device cuda [--kernels auto|eager] [--toy]
                                [--profile N]   (then the N ops that took the most device time)
    python scripts/gpu_check.py fsdp            (under torchrun: one rank per GPU, or gloo on CPU)
    python scripts/gpu_check.py engine-row JSON
    python scripts/gpu_check.py train-row RUN_DIR SECONDS
    python scripts/gpu_check.py table RESULTS_FILE

The learner figure counts the tokens of every trained sequence; its share of the bf16 peak
takes 6 FLOPs per active parameter per token (forward and backward, embeddings left out,
checkpointing's recomputation not counted) for the policy and for each of the critic's updates.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# Dense bf16 tensor-core peaks (FLOP/s) by device-name fragment, from the vendors' data sheets.
BF16_PEAKS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12}

FULL_SIZE = dict(
    hidden_size=1024, num_hidden_layers=12, num_attention_heads=16, num_key_value_heads=4,
    head_dim=64, num_experts=16, num_experts_per_tok=2, moe_intermediate_size=512,
    intermediate_size=2048,
)  # fmt: skip
TOY_SIZE = dict(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
    intermediate_size=128,
)  # fmt: skip


def row(stage: str, text: str) -> None:
    print(f"ROW {stage} | {text}", flush=True)


def active_parameters(model: object) -> int:
    """Parameters one token passes through: no embeddings, only its top-k share of the experts."""
    config = model.config
    share = config.num_experts_per_tok / config.num_experts
    total = 0
    for name, p in model.named_parameters():
        if "embed_tokens" in name:
            continue
        total += p.numel() * (share if ".experts." in name else 1)
    return round(total)


def build_model(args: argparse.Namespace) -> None:
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    from sao.models.local_checkpoint import build_bpe_tokenizer

    tokenizer = build_bpe_tokenizer()
    config = Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        **(TOY_SIZE if args.toy else FULL_SIZE),
    )
    torch.manual_seed(0)
    model = Qwen3MoeForCausalLM(config).float()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    total = sum(p.numel() for p in model.parameters())
    row(
        "model",
        f"Qwen3-MoE {total / 1e6:.1f}M parameters, {active_parameters(model) / 1e6:.1f}M active "
        f"without embeddings",
    )


def learner_step(args: argparse.Namespace) -> None:
    import torch

    from sao.config import load_config
    from sao.learner import Learner
    from sao.learner.precision import prepare_model
    from sao.models.critic import ValueModel
    from sao.models.kernels import running_kernels
    from sao.models.policy import load_policy, token_logprobs
    from sao.plumbing.profiling import profile_table
    from sao.trajectory import Trajectory

    device = torch.device(args.device)
    seqs, width, prompt = (4, 64, 16) if args.toy else (16, 512, 64)
    policy, tokenizer = load_policy(args.model)
    config = load_config(
        "sao",
        overrides=[
            f"train.learner_device={args.device}",
            "train.learner_precision=bf16",
            "train.gradient_checkpointing=true",
        ],
    )
    learner = Learner(policy, config, ValueModel.from_policy(policy), tokenizer.pad_token_id)
    if args.kernels != "auto":
        for model in (learner.policy, learner.critic):
            prepare_model(model, device, gradient_checkpointing=True, kernels=args.kernels)
    gen = torch.Generator().manual_seed(0)
    batch = []
    for i in range(seqs):
        ids = torch.randint(10, len(tokenizer), (width,), generator=gen)
        mask = [0] * prompt + [1] * (width - prompt)
        with torch.no_grad():
            lp = token_logprobs(
                learner.policy, ids[None].to(device), torch.ones(1, width, device=device)
            )
        batch.append(
            Trajectory(
                token_ids=ids.tolist(),
                action_mask=mask,
                rollout_logprobs=[float(x) * m for x, m in zip(lp[0].cpu(), mask, strict=True)],
                policy_versions=[0 if m else -1 for m in mask],
                reward=float(i % 2),
                turn_spans=((prompt, width),),
                metadata={"index": i},
            )
        )
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    learner.step(batch)  # warm-up: allocations and kernel selection stay out of the timing
    synchronize()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    steps = 1 if args.toy else 3
    start = time.perf_counter()
    for _ in range(steps):
        metrics = learner.step(batch)
    synchronize()
    seconds = (time.perf_counter() - start) / steps
    dtypes = {p.dtype for p in learner.policy.parameters()}
    if dtypes != {torch.float32}:
        raise SystemExit(f"learner: parameters are {sorted(map(str, dtypes))}, not fp32 masters")
    tokens = seqs * width
    flops = (
        6
        * tokens
        * (
            active_parameters(learner.policy)
            + config.critic.k_updates * active_parameters(learner.critic.backbone)
        )
    )
    peak = next((v for k, v in BF16_PEAKS.items() if k in _device_name(device)), None)
    share = f"{100 * flops / seconds / peak:.1f}% of bf16 peak" if peak else "bf16 peak n/a"
    memory = (
        f", peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB"
        if device.type == "cuda"
        else ""
    )
    kernels = running_kernels(learner.policy)
    if args.profile:
        print(profile_table(lambda: learner.step(batch), device, args.profile), flush=True)
    row(
        f"learner_{args.kernels}",
        f"{tokens / seconds:,.0f} trained tokens/s, {share} ({seqs}x{width} tokens, "
        f"{seconds:.2f} s/step{memory}; attention {kernels.attention}, experts "
        f"{kernels.experts}; pg_loss {metrics['actor/pg_loss']:.4f})",
    )


def _device_name(device: object) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def fsdp_step(args: argparse.Namespace) -> None:
    """Each rank takes an unsharded step alone, then the same step sharded; rank 0 compares."""
    import torch
    import torch.distributed as dist
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    from sao.config import load_config
    from sao.learner import Learner
    from sao.learner.sharding import is_sharded
    from sao.models.critic import ValueModel
    from sao.models.policy import token_logprobs
    from sao.trajectory import Trajectory

    cuda = torch.cuda.is_available() and not args.cpu
    device = f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu"

    def step():
        torch.manual_seed(0)
        config = Qwen3MoeConfig(
            vocab_size=512, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=128,
        )  # fmt: skip
        policy = Qwen3MoeForCausalLM(config).float().eval()
        gen = torch.Generator().manual_seed(1)
        batch = []
        for i in range(4):
            ids = torch.randint(1, 512, (32,), generator=gen)
            mask = [0] * 8 + [1] * 24
            with torch.no_grad():
                lp = token_logprobs(policy, ids[None], torch.ones(1, 32))[0]
            batch.append(
                Trajectory(
                    token_ids=ids.tolist(),
                    action_mask=mask,
                    rollout_logprobs=[float(x) * m for x, m in zip(lp, mask, strict=True)],
                    policy_versions=[0 if m else -1 for m in mask],
                    reward=float(i % 2),
                    turn_spans=((8, 32),),
                    metadata={"index": i},
                )
            )
        cfg = load_config("sao", overrides=[f"train.learner_device={device}", "actor.lr=1e-3"])
        learner = Learner(policy, cfg, ValueModel.from_policy(policy))
        metrics = learner.step(batch)
        return metrics, learner.policy_state_dict(), is_sharded(learner.policy)

    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    plain, plain_weights, _ = step()
    dist.init_process_group("nccl" if cuda else "gloo")
    device = "cuda" if cuda else "cpu"
    sharded, sharded_weights, was_sharded = step()
    if dist.get_rank() == 0:
        gap = max((plain_weights[k] - sharded_weights[k]).abs().max().item() for k in plain_weights)
        loss_gap = abs(sharded["actor/pg_loss"] - plain["actor/pg_loss"])
        ok = was_sharded and loss_gap < 1e-4 and gap < 1e-4
        row(
            "fsdp2",
            f"{dist.get_world_size()} ranks ({'nccl' if cuda else 'gloo'}): sharded={was_sharded}, "
            f"pg_loss gap {loss_gap:.1e}, largest weight gap after the step {gap:.1e}",
        )
        if not ok:
            raise SystemExit("fsdp2: the sharded step differs from the unsharded one")
    dist.destroy_process_group()


def engine_row(args: argparse.Namespace) -> None:
    figures = json.loads(Path(args.json).read_text())
    parts = [f"built-in {figures['builtin_tokens_per_s']:,.0f} tokens/s"]
    parts.append(f"HF generate {figures['generate_tokens_per_s']:,.0f} tokens/s")
    parts.append(f"built-in/generate {figures['ratio_builtin']:.2f}x")
    if "vllm_tokens_per_s" in figures:
        parts.append(f"vLLM {figures['vllm_tokens_per_s']:,.0f} tokens/s")
        parts.append(f"vLLM/built-in {figures['vllm_over_builtin']:.2f}x")
    setting = f"{figures['requests']} requests, batch {figures['batch']}, {figures['precision']}"
    row(args.stage, f"{', '.join(parts)} ({setting})")


def train_row(args: argparse.Namespace) -> None:
    summary = json.loads((Path(args.run_dir) / "summary.json").read_text())
    row(
        args.stage,
        f"{args.seconds:.0f} s wall, held-out accuracy {summary['initial_accuracy']:.3f} -> "
        f"{summary['final_accuracy']:.3f} ({summary.get('steps', '?')} steps)",
    )


def table(args: argparse.Namespace) -> None:
    """The one table: stage, status, figures (from the `ROW` lines and the shell's statuses)."""
    lines = [
        line.rstrip("\n").split("\t", 2) for line in Path(args.results).read_text().splitlines()
    ]
    width = max(len(stage) for stage, _, _ in lines)
    print(f"{'stage':<{width}}  status  result")
    print(f"{'-' * width}  ------  {'-' * 40}")
    for stage, status, text in lines:
        print(f"{stage:<{width}}  {status:<6}  {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build-model")
    p.add_argument("out")
    p.add_argument("--toy", action="store_true")
    p = sub.add_parser("learner")
    p.add_argument("model")
    p.add_argument("--device", default="cuda")
    p.add_argument("--kernels", choices=["auto", "eager"], default="auto")
    p.add_argument("--toy", action="store_true")
    p.add_argument("--profile", type=int, default=0, metavar="N")
    p = sub.add_parser("fsdp")
    p.add_argument("--cpu", action="store_true")
    p = sub.add_parser("engine-row")
    p.add_argument("json")
    p.add_argument("--stage", default="engine")
    p = sub.add_parser("train-row")
    p.add_argument("run_dir")
    p.add_argument("seconds", type=float)
    p.add_argument("--stage", default="train")
    p = sub.add_parser("table")
    p.add_argument("results")
    args = parser.parse_args()
    commands = {
        "build-model": build_model,
        "learner": learner_step,
        "fsdp": fsdp_step,
        "engine-row": engine_row,
        "train-row": train_row,
        "table": table,
    }
    commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
