"""A small "real" checkpoint made locally: a BPE tokenizer with a chat template and a random Qwen3.

It stands in for a downloaded model wherever one is needed (tests, the conformance suite, the
guide in `docs/your_own_model.md`): the tokenizer is a byte-level BPE trained with `tokenizers` on
source files that ship with Python, so tool tags such as `</python>` are several tokens, never one;
the chat template is Qwen-style (`<|im_start|>role\\n...<|im_end|>\\n`); the model is a randomly
initialised Qwen3 (dense) or Qwen3-MoE with head_dim 32, saved with `save_pretrained`. Nothing is
downloaded. Building one takes a few seconds.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path
from typing import Literal

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

PAD = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)

# Standard-library modules whose source trains the tokenizer: plain English and Python, so
# numbers, brackets and keywords get merges without any file from outside Python itself.
_STDLIB_SOURCES: tuple[str, ...] = (
    "textwrap.py",
    "string.py",
    "calendar.py",
    "fractions.py",
    "statistics.py",
    "json/decoder.py",
    "json/encoder.py",
    "argparse.py",
)

Kind = Literal["dense", "moe"]


def stdlib_text() -> list[str]:
    """The training text: a few source files of the running Python's standard library."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts = [(root / name).read_text(encoding="utf-8") for name in _STDLIB_SOURCES]
    if not any(texts):
        raise RuntimeError(f"local_checkpoint: no standard-library source found under {root}")
    return texts


def build_bpe_tokenizer(vocab_size: int = 1536) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on `stdlib_text()`, with a Qwen-style chat template.

    `<|im_end|>` is the EOS token (it ends an assistant turn), `<|endoftext|>` pads; there is no
    BOS token, as in Qwen's tokenizers.
    """
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(stdlib_text(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=PAD,
        additional_special_tokens=[IM_START],
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_random_qwen3(
    tokenizer: PreTrainedTokenizerFast, kind: Kind = "moe", seed: int = 0
) -> PreTrainedModel:
    """A randomly initialised small Qwen3 (`"dense"`) or Qwen3-MoE (`"moe"`), fp32, head_dim 32."""
    common: dict[str, object] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "intermediate_size": 128,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": tokenizer.eos_token_id,
    }
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if kind == "dense":
            model: PreTrainedModel = Qwen3ForCausalLM(Qwen3Config(**common))
        elif kind == "moe":
            config = Qwen3MoeConfig(
                **common, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64
            )
            model = Qwen3MoeForCausalLM(config)
        else:
            raise ValueError(f"build_random_qwen3: kind must be 'dense' or 'moe', got {kind!r}")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.float().eval()


def save_local_checkpoint(out: str | Path, kind: Kind = "moe", seed: int = 0) -> Path:
    """Build the tokenizer and a random Qwen3 of `kind` and save both to the directory `out`."""
    out = Path(out)
    tokenizer = build_bpe_tokenizer()
    model = build_random_qwen3(tokenizer, kind, seed)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m sao.models.local_checkpoint OUT [dense|moe]`: write a local checkpoint."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2) or (len(args) == 2 and args[1] not in ("dense", "moe")):
        print("usage: python -m sao.models.local_checkpoint OUT_DIR [dense|moe]", file=sys.stderr)
        return 2
    kind: Kind = "dense" if len(args) == 2 and args[1] == "dense" else "moe"
    path = save_local_checkpoint(args[0], kind)
    print(f"saved a random Qwen3 ({kind}) with a BPE tokenizer to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
