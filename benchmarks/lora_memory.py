"""LoRA against full fine-tuning on one model: peak memory and learner step time, side by side.

Each mode runs in a fresh process (so its peak resident memory is its own): it loads the model,
builds the policy and critic a run would (`sao.models.lora.models_to_train`), the engine's plain
copy, a `Learner` under the given config, and takes `--steps` learner steps on synthetic calc-like
trajectories (the policy's own log-probs, so DIS keeps every token), or on a run's recorded ones
(`--trajectories`, whose lengths are the model's own), after one warm-up step. It
reports the median step time, the peak RSS, and where the memory goes: the parameters held
(policy, critic, counted once where they share), the trainable ones, the optimizer states, the
engine's copy, and the full-vocabulary logits of one forward pass (`micro_batch_tokens x vocab`
floats, the largest activation of a small model with a large vocabulary; its log-softmax and
their gradients hold several more of the same size). It also measures the peak of each phase
on its own (`sao.plumbing.memory.PhasePeaks`): loading the model, building what trains (and the
engine, with its copy), the warm-up step (which allocates the optimizer states), the timed
steps, the rollout side as `sao train` runs it beside the learner (publishing the weights into
the engine, a batch of `--batch` real episodes of the config's environment, and a learner step
taken while another such batch runs in a thread), and taking the state a checkpoint writes
(`Learner.state_dict`, as a snapshot and as the live tensors a run writes), with what stays
resident after each, so the parts a step adds on top of what is held are measured rather than
inferred. Ratios (`lora / full`) are printed last.

    python benchmarks/lora_memory.py --model checkpoints/smollm2 [--config examples/smollm2.yaml]
        [--batch 32] [--steps 2] [--rank 8] [--trajectories RUN/trajectories.jsonl]
        [--set key=value ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

MODES = ("full", "lora")


def _bytes(tensors: object) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _run_catching(loop: object, episodes: list, failures: list[BaseException]) -> None:
    try:
        loop.run(episodes)
    except BaseException as err:  # re-raised in the measuring thread
        failures.append(err)


def measure(args: argparse.Namespace, mode: str) -> dict[str, float]:
    """One mode, in this process: build, step, and account for memory."""
    import torch

    from sao.config import load_config
    from sao.envs.registry import make_task_source
    from sao.learner import Learner
    from sao.models.lora import models_to_train, plain_copy
    from sao.models.policy import load_policy
    from sao.plumbing.memory import PhasePeaks, resident_gb
    from sao.rollout.setup import build_agent_loop

    sys.path.insert(0, str(Path(__file__).parent))
    from learner import synthetic_trajectories
    from learner_presets import read_trajectories

    torch.manual_seed(0)
    rank = args.rank if mode == "lora" else 0
    overrides = [f"model.path={args.model}", f"model.lora.rank={rank}", *args.overrides]
    config = load_config("sao", args.config, overrides)
    memory, resident = PhasePeaks(), {}
    with memory.phase("load"):
        policy, tokenizer = load_policy(args.model)
    resident["load"] = resident_gb()
    vocab = len(tokenizer)
    with memory.phase("build"):
        policy, critic = models_to_train(policy, config.model.lora, config.critic.enabled)
        # The engine holds its own plain copy in both modes (built here, so the peak has it).
        plain = plain_copy(policy)
        engine_bytes = _bytes(plain.parameters())
        loop = build_agent_loop(config, plain, tokenizer, seed=0)
        del plain
        learner = Learner(policy, config, critic, pad_token_id=tokenizer.pad_token_id)
    resident["build"] = resident_gb()
    # Batches for the warm-up, the timed steps and the step beside sampling.
    if args.trajectories:
        recorded = read_trajectories(args.trajectories, (args.steps + 2) * args.batch)
        batches = [recorded[i : i + args.batch] for i in range(0, len(recorded), args.batch)]
    else:
        batches = [
            synthetic_trajectories(policy, vocab, args.batch, seed=i) for i in range(args.steps + 2)
        ]
    beside = batches.pop()
    times = []
    for i, batch in enumerate(batches):
        with memory.phase("steps" if i else "first_step"):  # the first step is a warm-up
            started = time.perf_counter()
            learner.step(batch)
            if i:
                times.append(time.perf_counter() - started)
        resident["steps" if i else "first_step"] = resident_gb()
    # The rollout side as `sao train` runs it beside the learner: weights published into the
    # engine, a batch of the environment's episodes, and a learner step taken while they run.
    tasks = make_task_source(config.env.name, **config.env.task_options).train(args.batch, 0)
    with memory.phase("publish"):
        loop.engine.update_weights(learner.policy_state_dict(), learner.version)
    resident["publish"] = resident_gb()
    with memory.phase("sampling"):
        loop.run([(f"alone-{i}", task, {}) for i, task in enumerate(tasks)])
    resident["sampling"] = resident_gb()
    with memory.phase("step_while_sampling"):
        failures: list[BaseException] = []
        sampler = threading.Thread(
            target=_run_catching,
            args=(loop, [(f"beside-{i}", task, {}) for i, task in enumerate(tasks)], failures),
        )
        sampler.start()
        learner.step(beside)
        sampler.join()
        if failures:
            raise failures[0]
    resident["step_while_sampling"] = resident_gb()
    loop.close()
    # What a checkpoint holds while it is written: the learner's own tensors, or a snapshot
    # (in that order: memory a snapshot frees is not all handed back, and would count as live).
    for name, snapshot in (("checkpoint_live", False), ("checkpoint_snapshot", True)):
        with memory.phase(name):
            state = learner.state_dict(snapshot=snapshot)
            resident[name] = resident_gb()
            del state
    held = {id(p): p for m in (policy, critic) if m is not None for p in m.parameters()}
    trainable = [p for p in held.values() if p.requires_grad]
    optimizers = [learner.actor_optimizer, learner.critic_optimizer]
    states = [
        t
        for opt in optimizers
        if opt is not None
        for state in opt.state.values()
        for t in state.values()
        if torch.is_tensor(t) and t.dim() > 0
    ]
    tokens = sum(len(t) for t in batches[-1])
    return {
        "step_s": statistics.median(times),
        "learner_tokens_per_s": tokens / statistics.median(times),
        "peak_rss_gb": memory.peak_gb(),
        **{f"peak_{name}_gb": gb for name, gb in memory.by_phase().items()},
        **{f"resident_after_{name}_gb": gb for name, gb in resident.items() if gb is not None},
        "parameters_gb": _bytes(held.values()) / 2**30,
        "trainable_parameters": float(sum(p.numel() for p in trainable)),
        "gradients_gb": _bytes(trainable) / 2**30,
        "optimizer_states_gb": _bytes(states) / 2**30,
        "engine_copy_gb": engine_bytes / 2**30,
        "logits_per_pass_gb": config.train.micro_batch_tokens * vocab * 4 / 2**30,
        "batch_tokens": float(tokens),
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a local HF checkpoint")
    parser.add_argument("--config", help="a config file, e.g. examples/smollm2.yaml")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up")
    parser.add_argument("--rank", type=int, default=8, help="the LoRA mode's model.lora.rank")
    parser.add_argument(
        "--trajectories",
        type=Path,
        help="a run's trajectories.jsonl (of --model's tokenizer): its batches in file order "
        "instead of synthetic calc-like ones",
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.one:
        print(json.dumps(measure(args, args.one)))
        return 0
    argv = sys.argv[1:] if argv is None else argv
    results = {}
    for mode in MODES:
        done = subprocess.run(
            [sys.executable, __file__, *argv, "--one", mode],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            return done.returncode
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    for mode, row in results.items():
        print(mode, " ".join(f"{k}={v:.4g}" for k, v in row.items()))
    ratios = {
        key: results["lora"][key] / results["full"][key]
        for key in ("peak_rss_gb", "step_s", "optimizer_states_gb")
        if results["full"][key]
    }
    print("lora / full:", " ".join(f"{k}={v:.3f}" for k, v in ratios.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({**results, "ratios": ratios}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
