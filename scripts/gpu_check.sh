#!/usr/bin/env bash
# The checks that need a GPU, in one script. Run from the repository root on a machine with a
# CUDA GPU, with sao installed in a CUDA build of torch (`pip install -e '.[vllm,test]'`):
#
#   scripts/gpu_check.sh [WORK_DIR]          (default WORK_DIR: /tmp/sao_gpu_check)
#
# Stages (each prints PASS, FAIL or SKIP with the reason; the exit status is 1 if any failed):
#   1. model       build a randomly initialised Qwen3-MoE of about 330M parameters locally
#                  (config only, BPE tokenizer of sao.models.local_checkpoint), save_pretrained
#   2. learner     one learner step on it on cuda: bf16 autocast over fp32 master weights,
#                  gradient checkpointing; prints the step time and peak GPU memory
#   3. fsdp2       with 2 or more GPUs: a learner step sharded with FSDP2 over NCCL (torchrun,
#                  one rank per GPU) against the same step unsharded
#   3b. train_ranks with 2 or more GPUs: sao train with train.learner_ranks=N (one rank per GPU,
#                  FSDP2 over NCCL), built-in engine on cuda, --steps 3
#   4. conformance tests/conformance (built-in engine always, vLLM where it imports)
#   5. train       sao train --set model.path=MODEL --set rollout.engine=vllm --steps 3
#   6. throughput  benchmarks/engine_throughput.py --engines builtin,vllm (tokens/s, side by side)
# Stages 5 and 6 need vllm to import; the script says SKIP where it does not.
set -uo pipefail

WORK=${1:-/tmp/sao_gpu_check}
PY=${PYTHON:-python}
MODEL="$WORK/qwen3_moe_330m"
mkdir -p "$WORK"
declare -a RESULTS=()
FAILED=0

stage() {  # stage NAME COMMAND...: run, record PASS or FAIL
    local name=$1
    shift
    echo "=== $name: $*"
    if "$@"; then
        RESULTS+=("PASS  $name")
    else
        RESULTS+=("FAIL  $name (exit $?)")
        FAILED=1
    fi
}

skip() {  # skip NAME REASON
    echo "=== $1: skipped: $2"
    RESULTS+=("SKIP  $1: $2")
}

if ! $PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu_check: torch sees no CUDA device here (torch $($PY -c 'import torch; print(torch.__version__)'))" >&2
    exit 2
fi
GPUS=$($PY -c 'import torch; print(torch.cuda.device_count())')
$PY -c 'import torch; print("torch", torch.__version__, "|", torch.cuda.device_count(), "x", torch.cuda.get_device_name(0))'

build_model() {
    $PY - "$MODEL" <<'EOF'
import sys

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from sao.models.local_checkpoint import build_bpe_tokenizer

out = sys.argv[1]
tokenizer = build_bpe_tokenizer()
config = Qwen3MoeConfig(
    vocab_size=len(tokenizer),
    hidden_size=1024,
    num_hidden_layers=12,
    num_attention_heads=16,
    num_key_value_heads=4,
    head_dim=64,
    num_experts=16,
    num_experts_per_tok=2,
    moe_intermediate_size=512,
    intermediate_size=2048,
    max_position_embeddings=4096,
    tie_word_embeddings=False,
    pad_token_id=tokenizer.pad_token_id,
    bos_token_id=None,
    eos_token_id=tokenizer.eos_token_id,
)
torch.manual_seed(0)
model = Qwen3MoeForCausalLM(config).float()
model.generation_config.pad_token_id = tokenizer.pad_token_id
model.generation_config.eos_token_id = tokenizer.eos_token_id
model.save_pretrained(out)
tokenizer.save_pretrained(out)
print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters -> {out}")
EOF
}

learner_step() {
    $PY - "$MODEL" <<'EOF'
import sys
import time

import torch

from sao.config import load_config
from sao.learner import Learner
from sao.models.critic import ValueModel
from sao.models.policy import load_policy, token_logprobs
from sao.trajectory import Trajectory

policy, tokenizer = load_policy(sys.argv[1])
config = load_config("sao", overrides=[
    "train.learner_device=cuda", "train.learner_precision=bf16",
    "train.gradient_checkpointing=true",
])
learner = Learner(policy, config, ValueModel.from_policy(policy), tokenizer.pad_token_id)
gen = torch.Generator().manual_seed(0)
batch = []
for i in range(8):
    ids = torch.randint(10, len(tokenizer), (512,), generator=gen)
    mask = [0] * 64 + [1] * 448
    with torch.no_grad():
        lp = token_logprobs(learner.policy, ids[None].cuda(), torch.ones(1, 512).cuda())[0].cpu()
    batch.append(Trajectory(
        token_ids=ids.tolist(), action_mask=mask,
        rollout_logprobs=[float(x) * m for x, m in zip(lp, mask)],
        policy_versions=[0 if m else -1 for m in mask], reward=float(i % 2),
        turn_spans=((64, 512),), metadata={"index": i},
    ))
torch.cuda.synchronize()
torch.cuda.reset_peak_memory_stats()
start = time.perf_counter()
metrics = learner.step(batch)
torch.cuda.synchronize()
dtypes = {p.dtype for p in learner.policy.parameters()}
print(f"learner step (8 x 512 tokens, bf16 autocast, checkpointing): "
      f"{time.perf_counter() - start:.2f} s, peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, "
      f"pg_loss {metrics['actor/pg_loss']:.4f}, ratio_mean {metrics.get('actor/ratio_mean', float('nan')):.4f}, "
      f"parameter dtypes {sorted(map(str, dtypes))}")
assert dtypes == {torch.float32}
EOF
}

fsdp_step() {
    # Each rank first takes an unsharded step on its own GPU (no process group yet), then joins
    # an NCCL group and takes the same step with FSDP2; rank 0 compares.
    cat > "$WORK/fsdp_check.py" <<'EOF'
import os

import torch
import torch.distributed as dist
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from sao.config import load_config
from sao.learner import Learner
from sao.learner.sharding import is_sharded
from sao.models.critic import ValueModel
from sao.models.policy import token_logprobs
from sao.trajectory import Trajectory


def step():
    torch.manual_seed(0)
    config = Qwen3MoeConfig(vocab_size=512, hidden_size=256, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                            num_experts=8, num_experts_per_tok=2, moe_intermediate_size=256)
    policy = Qwen3MoeForCausalLM(config).float().eval()
    gen = torch.Generator().manual_seed(1)
    batch = []
    for i in range(4):
        ids = torch.randint(1, 512, (64,), generator=gen)
        mask = [0] * 16 + [1] * 48
        with torch.no_grad():
            lp = token_logprobs(policy, ids[None], torch.ones(1, 64))[0]
        batch.append(Trajectory(token_ids=ids.tolist(), action_mask=mask,
                                rollout_logprobs=[float(x) * m for x, m in zip(lp, mask)],
                                policy_versions=[0 if m else -1 for m in mask],
                                reward=float(i % 2), turn_spans=((16, 64),), metadata={"index": i}))
    cfg = load_config("sao", overrides=["train.learner_device=cuda", "actor.lr=1e-3"])
    learner = Learner(policy, cfg, ValueModel.from_policy(policy))
    metrics = learner.step(batch)
    return metrics, learner.policy_state_dict(), is_sharded(learner.policy)


torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
plain, plain_weights, _ = step()
dist.init_process_group("nccl")
sharded, sharded_weights, was_sharded = step()
if dist.get_rank() == 0:
    gap = max((plain_weights[k] - sharded_weights[k]).abs().max().item() for k in plain_weights)
    print(f"fsdp2 on {dist.get_world_size()} GPUs: sharded={was_sharded}, pg_loss "
          f"{sharded['actor/pg_loss']:.6f} vs unsharded {plain['actor/pg_loss']:.6f}, "
          f"largest weight gap after the step {gap:.2e}")
    assert was_sharded and abs(sharded["actor/pg_loss"] - plain["actor/pg_loss"]) < 1e-4
    assert gap < 1e-4
dist.destroy_process_group()
EOF
    $PY -m torch.distributed.run --nproc-per-node "$GPUS" "$WORK/fsdp_check.py"
}

train_ranks() {
    $PY -m sao.cli train --env calc --steps 3 --out "$WORK/run_ranks" \
        --set model.path="$MODEL" --set rollout.engine_device=cuda --set rollout.precision=bf16 \
        --set train.learner_device=cuda --set train.learner_ranks="$GPUS" \
        --set train.learner_precision=bf16 \
        --set train.batch_size=8 --set rollout.concurrency=8 --set train.eval_n=16 \
        --set critic.pretrain.num_trajectories=16 --set critic.pretrain.max_steps=5
}

train_vllm() {
    $PY -m sao.cli train --env calc --steps 3 --out "$WORK/run_vllm" \
        --set model.path="$MODEL" --set rollout.engine=vllm --set rollout.precision=bf16 \
        --set train.learner_device=cuda --set train.learner_precision=bf16 \
        --set train.batch_size=8 --set rollout.concurrency=8 --set train.eval_n=16 \
        --set critic.pretrain.num_trajectories=16 --set critic.pretrain.max_steps=5
}

throughput() {
    $PY benchmarks/engine_throughput.py --engines builtin,vllm --precision bf16 \
        --json "$WORK/throughput.json"
}

stage model build_model
if [ -f "$MODEL/config.json" ]; then
    stage learner learner_step
else
    skip learner "no model was built"
fi

if [ "$GPUS" -ge 2 ]; then
    stage fsdp2 fsdp_step
    stage train_ranks train_ranks
else
    skip fsdp2 "one GPU here; FSDP2 needs two or more"
    skip train_ranks "one GPU here; learner ranks need two or more"
fi

stage conformance $PY -m pytest -q -s tests/conformance

if ! $PY -c 'import vllm' 2>/dev/null; then
    skip train "vllm does not import here (pip install -e '.[vllm]')"
    skip throughput "vllm does not import here"
else
    stage train train_vllm
    stage throughput throughput
fi

echo "=== summary"
printf '%s\n' "${RESULTS[@]}"
exit $FAILED
