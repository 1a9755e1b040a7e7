"""A GGUF file (as llama.cpp and Ollama run them) written out as an ordinary Hugging Face checkpoint.

The file is read by transformers' own GGUF reader, which dequantises every tensor and rebuilds the
tokenizer and chat template from the file's metadata. The loaded model still carries the GGUF
quantizer, which makes `save_pretrained` refuse; `plain_checkpoint` clears it, after which the
model is an ordinary dense one. The checkpoint is written beside `out` under a temporary name,
read back, checked to give the direct load's logits, and only then renamed into place, so a
failure at any point leaves nothing at `out`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

GGUF_MAGIC = b"GGUF"
EXTRA_HINT = "pip install 'sao[gguf]'"
REQUIRED_PACKAGES = ("gguf", "accelerate")

Dtype = Literal["float32", "bfloat16"]
DTYPES = ("float32", "bfloat16")

# Enough tokens to exercise every layer and position encoding without costing a second.
_PROBE_TEXT = "What is 17 * 23? Let me compute it step by step."


class GGUFImportError(ValueError):
    """The file cannot be imported; the message is the one line the command prints."""


@dataclass(frozen=True)
class ImportedModel:
    """What `import_gguf` wrote and how closely it reproduces the direct GGUF load."""

    out: Path
    architecture: str
    parameters: int
    vocab_size: int
    dtype: str
    has_chat_template: bool
    max_logit_gap: float


def missing_packages() -> list[str]:
    """The packages transformers' GGUF reader needs that are not installed."""
    return [name for name in REQUIRED_PACKAGES if importlib.util.find_spec(name) is None]


def check_gguf_file(path: str | Path) -> Path:
    """`path` if it names a readable file that starts with the GGUF magic bytes."""
    path = Path(path)
    if not path.exists():
        raise GGUFImportError(f"{path}: does not exist")
    if not path.is_file():
        raise GGUFImportError(f"{path}: is not a file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(GGUF_MAGIC))
    except OSError as err:
        raise GGUFImportError(f"{path}: cannot be read ({err.strerror})") from None
    if magic != GGUF_MAGIC:
        raise GGUFImportError(
            f"{path}: not a GGUF file (it does not start with the bytes {GGUF_MAGIC.decode()!r})"
        )
    return path


def check_output(out: str | Path) -> Path:
    """`out` if nothing is there yet (or an empty directory): an import never overwrites."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise GGUFImportError(f"--out {out}: already exists and is not empty")
    return out


def read_gguf(path: Path, dtype: Dtype) -> tuple[torch.nn.Module, object]:
    """The model and tokenizer transformers builds from the GGUF file at `path`, in `dtype`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(
            path.parent, gguf_file=path.name, local_files_only=True
        )
        model = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=getattr(torch, dtype), local_files_only=True
        )
    except Exception as err:  # the reader raises many kinds; each becomes one line
        raise GGUFImportError(f"{path}: {_reason(err)}") from None
    return model.eval(), tokenizer


def plain_checkpoint(model: torch.nn.Module) -> torch.nn.Module:
    """Drop what marks `model` as GGUF-quantised; its tensors are already dequantised."""
    model.hf_quantizer = None
    if hasattr(model, "is_quantized"):
        model.is_quantized = False
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    return model


def import_gguf(
    path: str | Path, out: str | Path, dtype: Dtype = "float32", verify: bool = True
) -> ImportedModel:
    """Write the GGUF model at `path` as a Hugging Face checkpoint directory `out`.

    Raises:
        GGUFImportError: a missing package, a file that is not GGUF or cannot be read, an
            architecture or quantisation transformers cannot read, an existing `out`, or a
            written checkpoint whose logits differ from the direct load's.
    """
    if dtype not in DTYPES:
        raise GGUFImportError(f"--dtype {dtype}: must be one of {', '.join(DTYPES)}")
    missing = missing_packages()
    if missing:
        raise GGUFImportError(
            f"reading GGUF files needs the package(s) {', '.join(missing)}: {EXTRA_HINT}"
        )
    path = check_gguf_file(path)
    out = check_output(out)
    model, tokenizer = read_gguf(path, dtype)
    plain_checkpoint(model)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        _write(model, tokenizer, staging)
        gap = _logit_gap(model, tokenizer, staging) if verify else float("nan")
        if out.exists():
            out.rmdir()
        staging.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would hide the model from others
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ImportedModel(
        out=out,
        architecture=type(model).__name__,
        parameters=sum(p.numel() for p in model.parameters()),
        vocab_size=len(tokenizer),
        dtype=dtype,
        has_chat_template=bool(getattr(tokenizer, "chat_template", None)),
        max_logit_gap=gap,
    )


def _write(model: torch.nn.Module, tokenizer: object, directory: Path) -> None:
    if getattr(tokenizer, "pad_token", None) is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    generation = model.generation_config
    generation.eos_token_id = tokenizer.eos_token_id
    generation.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def _logit_gap(model: torch.nn.Module, tokenizer: object, directory: Path) -> float:
    """Largest absolute logit difference between `model` and the checkpoint written from it."""
    import torch
    from transformers import AutoModelForCausalLM

    written = AutoModelForCausalLM.from_pretrained(
        directory, dtype=model.dtype, local_files_only=True
    ).eval()
    ids = torch.tensor([tokenizer.encode(_PROBE_TEXT)])
    with torch.no_grad():
        direct = model(input_ids=ids).logits.float()
        reloaded = written(input_ids=ids).logits.float()
    gap = (direct - reloaded).abs().max().item()
    if not gap <= 1e-4 * max(1.0, direct.abs().max().item()):
        raise GGUFImportError(
            f"the written checkpoint's logits differ from the GGUF load's by up to {gap:.3g}"
        )
    return gap


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _reason(err: BaseException) -> str:
    text = str(err).strip()
    first = text.splitlines()[0] if text else type(err).__name__
    if isinstance(err, (EOFError, OSError)) or "memmap" in text or "buffer" in text.lower():
        return f"truncated or corrupt GGUF file ({first})"
    return first
