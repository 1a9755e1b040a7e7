#!/usr/bin/env bash
# The GPU measurement, in one script that prints one table. It runs the checkout's own code under
# the machine's Python (src/ goes on PYTHONPATH; nothing is installed): torch, transformers and the
# project's other dependencies must import there, vllm only for the vLLM rows.
#
#   scripts/gpu_check.sh [WORK_DIR]          on a CUDA machine (default WORK_DIR /tmp/sao_gpu_check)
#   scripts/gpu_check.sh --cpu [WORK_DIR]    every stage at toy size on the CPU (CI runs this)
#
# PYTHON picks the interpreter (default python3). Stages, each a row of the table (PASS, FAIL or
# SKIP with the reason; the exit status is 1 if any failed):
#   model         build a randomly initialised Qwen3-MoE of 337M parameters (toy: 0.4M) locally
#   learner_auto  learner steps on it, bf16 autocast over fp32 masters, gradient checkpointing,
#                 the device's fast kernels: trained tokens/s and % of the bf16 peak
#   learner_eager the same with eager attention and experts, for comparison
#   engine        benchmarks/engine_throughput.py on the same model: the built-in engine's
#                 tokens/s against HF `generate` (and vLLM's where vllm imports), bf16
#   fsdp2         2+ GPUs (toy: 2 gloo ranks): a sharded learner step equals the unsharded one
#   train_ranks   2+ GPUs (toy: 2 gloo ranks): `sao train --set train.learner_ranks=N`
#   conformance   tests/conformance (built-in engine always, vLLM where it imports)
#   train_vllm    where vllm imports: `sao train` on the 337M model with rollout.engine=vllm
#   imported_full, imported_lora  where GPU_CHECK_IMPORTED names a checkpoint (`sao import-gguf`,
#                 or its warm start): 3 steps of examples/smollm2.yaml on it, full and LoRA r=8
#   train_default `sao train` with the defaults on cuda (toy: `--quick`, 2 steps): wall time and
#                 held-out accuracy before and after; it gets what is left of GPU_CHECK_BUDGET_S
#                 (default 480 s) so the whole check takes about 8 minutes on one GPU
# GPU_CHECK_PROFILE=N also prints, in the learner_auto and engine logs, the N ops that took the
# most device time in one more learner step and one more batch of the engine (off the timings).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
CPU=0
if [ "${1:-}" = "--cpu" ]; then
    CPU=1
    shift
fi
WORK=${1:-/tmp/sao_gpu_check$([ "$CPU" = 1 ] && echo _cpu)}
PY=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET_S:-480}
PROFILE=${GPU_CHECK_PROFILE:-0}
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
MODEL="$WORK/model"
RESULTS="$WORK/results.tsv"
START=$(date +%s)
mkdir -p "$WORK/logs"
rm -rf "$MODEL" "$WORK"/run_* "$WORK"/warm_start_*
: >"$RESULTS"
FAILED=0

record() {  # record NAME STATUS TEXT
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RESULTS"
}

stage() {  # stage NAME TIMEOUT_S COMMAND...: run, log, record PASS/FAIL with the stage's ROW line
    local name=$1 limit=$2
    shift 2
    local log="$WORK/logs/$name.log"
    echo "=== $name: $*"
    # Functions of this script run in a child bash that sees them (exported below).
    if [ "$(type -t "$1")" = function ]; then
        timeout "$limit" bash -c '"$@"' _ "$@" >"$log" 2>&1
    else
        timeout "$limit" "$@" >"$log" 2>&1
    fi
    local code=$?
    tail -n 5 "$log"
    local text
    text=$(sed -n 's/^ROW [^|]* | //p' "$log" | tail -n 1)
    if [ "$code" -eq 0 ]; then
        record "$name" PASS "${text:-done}"
    else
        [ "$code" -eq 124 ] && text="timed out after ${limit}s" || text="exit $code: $(grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-160)"
        record "$name" FAIL "$text (log: $log)"
        FAILED=1
    fi
}

skip() {  # skip NAME REASON
    echo "=== $1: skipped: $2"
    record "$1" SKIP "$2"
}

if [ "$CPU" = 1 ]; then
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # toy sizes: threads cost more than they give
    DEV=cpu
    GPUS=0
    TOY=(--toy)
else
    if ! $PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
        echo "gpu_check: torch sees no CUDA device here (torch $($PY -c 'import torch; print(torch.__version__)')); scripts/gpu_check.sh --cpu runs the toy sizes" >&2
        exit 2
    fi
    DEV=cuda
    GPUS=$($PY -c 'import torch; print(torch.cuda.device_count())')
    TOY=()
fi
$PY -c 'import torch, transformers; print("torch", torch.__version__, "| transformers", transformers.__version__, "|", (f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "no CUDA"))'
HAS_VLLM=0
$PY -c 'import vllm' >/dev/null 2>&1 && HAS_VLLM=1

# Settings that keep a toy `sao train` to seconds (the CPU mode), on top of `--quick`.
TOY_TRAIN=(--quick --steps 2 --set sft.steps=6 --set sft.num_demonstrations=32 --set train.eval_n=8
    --set critic.pretrain.max_steps=2 --set critic.pretrain.num_trajectories=4
    --set train.batch_size=4 --set rollout.concurrency=4 --set rollout.max_new_tokens=24)

train_and_row() {  # train_and_row STAGE RUN_DIR SAO_TRAIN_ARGS...: run sao train, then its ROW
    local name=$1 run=$2
    shift 2
    local t0
    t0=$(date +%s)
    $PY -m sao.cli train --out "$run" --set "model.warm_start_dir=$WORK/warm_start_{env}" "$@" || return $?
    $PY scripts/gpu_check.py train-row "$run" "$(($(date +%s) - t0))" --stage "$name"
}

engine_bench() {
    local engines=builtin sizes
    [ "$HAS_VLLM" = 1 ] && engines=builtin,vllm
    if [ "$CPU" = 1 ]; then
        sizes=(--requests 8 --batch 4 --median 6 --cap 12)
    else
        sizes=(--requests 64 --batch 32 --median 48 --cap 256)
    fi
    $PY benchmarks/engine_throughput.py --model "$MODEL" --device "$DEV" --precision bf16 \
        --engines "$engines" --repeats 1 "${sizes[@]}" --json "$WORK/engine.json" \
        --profile "$PROFILE" || return $?
    $PY scripts/gpu_check.py engine-row "$WORK/engine.json"
}

conformance() {
    $PY -m pytest -q -p no:cacheprovider tests/conformance || return $?
}

conformance_row() {  # the pytest summary line of the conformance log, as the row's text
    local summary
    summary=$(grep -E '[0-9]+ passed' "$WORK/logs/conformance.log" | tail -n 1 | tr -d '=')
    [ -n "$summary" ] && sed -i "s/^conformance\tPASS\tdone$/conformance\tPASS\t${summary# }/" "$RESULTS"
}

export PY WORK MODEL DEV CPU HAS_VLLM PROFILE
export -f train_and_row engine_bench conformance

stage model 180 $PY scripts/gpu_check.py build-model "$MODEL" "${TOY[@]}"
if [ -f "$MODEL/config.json" ]; then
    stage learner_auto 180 $PY scripts/gpu_check.py learner "$MODEL" --device "$DEV" "${TOY[@]}" \
        --profile "$PROFILE"
    stage learner_eager 180 $PY scripts/gpu_check.py learner "$MODEL" --device "$DEV" --kernels eager "${TOY[@]}"
    stage engine 240 engine_bench
else
    for name in learner_auto learner_eager engine; do skip "$name" "no model was built"; done
fi

if [ "$CPU" = 1 ]; then
    stage fsdp2 180 $PY -m torch.distributed.run --nproc-per-node 2 scripts/gpu_check.py fsdp --cpu
    stage train_ranks 240 train_and_row train_ranks "$WORK/run_ranks" "${TOY_TRAIN[@]}" \
        --set train.learner_ranks=2
elif [ "$GPUS" -ge 2 ]; then
    stage fsdp2 180 $PY -m torch.distributed.run --nproc-per-node "$GPUS" scripts/gpu_check.py fsdp
    stage train_ranks 300 train_and_row train_ranks "$WORK/run_ranks" --steps 3 \
        --set model.path="$MODEL" --set rollout.engine_device=cuda --set rollout.precision=bf16 \
        --set train.learner_device=cuda --set train.learner_ranks="$GPUS" \
        --set train.learner_precision=bf16 --set train.batch_size=8 --set rollout.concurrency=8 \
        --set train.eval_n=16 --set critic.pretrain.num_trajectories=16 \
        --set critic.pretrain.max_steps=5
else
    skip fsdp2 "one GPU here; FSDP2 needs two or more"
    skip train_ranks "one GPU here; learner ranks need two or more"
fi

stage conformance 240 conformance
conformance_row

if [ "$HAS_VLLM" = 0 ]; then
    skip train_vllm "vllm does not import here"
elif [ "$CPU" = 1 ]; then
    stage train_vllm 240 train_and_row train_vllm "$WORK/run_vllm" "${TOY_TRAIN[@]}" \
        --set model.path="$MODEL" --set rollout.engine=vllm
else
    stage train_vllm 300 train_and_row train_vllm "$WORK/run_vllm" --steps 3 \
        --set model.path="$MODEL" --set rollout.engine=vllm --set rollout.precision=bf16 \
        --set train.learner_device=cuda --set train.learner_precision=bf16 \
        --set train.batch_size=8 --set rollout.concurrency=8 --set train.eval_n=16 \
        --set critic.pretrain.num_trajectories=16 --set critic.pretrain.max_steps=5
fi

IMPORTED=${GPU_CHECK_IMPORTED:-}
if [ -z "$IMPORTED" ]; then
    skip imported_full "GPU_CHECK_IMPORTED=DIR names no checkpoint (sao import-gguf writes one)"
    skip imported_lora "GPU_CHECK_IMPORTED=DIR names no checkpoint (sao import-gguf writes one)"
else
    IMPORTED_RUN=(--config examples/smollm2.yaml --steps 3 --set model.path="$IMPORTED"
        --set train.learner_device="$DEV" --set rollout.engine_device="$DEV"
        --set train.batch_size=8 --set rollout.concurrency=8 --set train.eval_n=16
        --set critic.pretrain.num_trajectories=16 --set critic.pretrain.max_steps=5)
    stage imported_full 300 train_and_row imported_full "$WORK/run_imported_full" "${IMPORTED_RUN[@]}"
    stage imported_lora 300 train_and_row imported_lora "$WORK/run_imported_lora" "${IMPORTED_RUN[@]}" \
        --set model.lora.rank=8
fi

if [ "$CPU" = 1 ]; then
    stage train_default 240 train_and_row train_default "$WORK/run_default" "${TOY_TRAIN[@]}"
else
    LEFT=$((BUDGET - ($(date +%s) - START)))
    [ "$LEFT" -lt 60 ] && LEFT=60
    stage train_default "$LEFT" train_and_row train_default "$WORK/run_default" \
        --set train.learner_device=cuda --set rollout.engine_device=cuda
fi

echo
echo "=== gpu_check$([ "$CPU" = 1 ] && echo ' --cpu'): $(($(date +%s) - START)) s"
$PY scripts/gpu_check.py table "$RESULTS"
exit $FAILED
