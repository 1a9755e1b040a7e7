"""Tiny GGUF files written here, laid out as llama.cpp's converter writes a Llama checkpoint.

The model is a random `LlamaForCausalLM` with the local byte-level BPE tokenizer
(`sao.models.local_checkpoint`), so a test can compare what `sao import-gguf` writes against the
weights the file was made from. llama.cpp stores q and k projections with their rotary halves
interleaved; `_permute` does what its converter does and transformers' reader undoes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from sao.models.local_checkpoint import build_bpe_tokenizer

TOKEN_NORMAL = 1
TOKEN_CONTROL = 3


def tiny_llama(tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> LlamaForCausalLM:
    """A random 2-layer Llama sized to `tokenizer`, fp32, with untied embeddings."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.float().eval()


def _permute(weights: np.ndarray, heads: int) -> np.ndarray:
    return (
        weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _tensors(model: LlamaForCausalLM) -> dict[str, np.ndarray]:
    config = model.config
    state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    tensors = {
        "token_embd.weight": state["model.embed_tokens.weight"],
        "output_norm.weight": state["model.norm.weight"],
        "output.weight": state["lm_head.weight"],
    }
    for i in range(config.num_hidden_layers):
        p = f"model.layers.{i}."
        tensors |= {
            f"blk.{i}.attn_norm.weight": state[p + "input_layernorm.weight"],
            f"blk.{i}.attn_q.weight": _permute(
                state[p + "self_attn.q_proj.weight"], config.num_attention_heads
            ),
            f"blk.{i}.attn_k.weight": _permute(
                state[p + "self_attn.k_proj.weight"], config.num_key_value_heads
            ),
            f"blk.{i}.attn_v.weight": state[p + "self_attn.v_proj.weight"],
            f"blk.{i}.attn_output.weight": state[p + "self_attn.o_proj.weight"],
            f"blk.{i}.ffn_norm.weight": state[p + "post_attention_layernorm.weight"],
            f"blk.{i}.ffn_gate.weight": state[p + "mlp.gate_proj.weight"],
            f"blk.{i}.ffn_up.weight": state[p + "mlp.up_proj.weight"],
            f"blk.{i}.ffn_down.weight": state[p + "mlp.down_proj.weight"],
        }
    return tensors


def write_gguf(
    model: LlamaForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    path: str | Path,
    quantization: str = "F32",
    architecture: str = "llama",
) -> Path:
    """Write `model` and `tokenizer` to the GGUF file `path`.

    `quantization` names a `gguf.GGMLQuantizationType` (F32, F16, Q8_0, ...) for the 2-D
    weights; norms stay F32, as llama.cpp keeps them.
    """
    import gguf

    path = Path(path)
    config = model.config
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny-llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_embedding_length(config.hidden_size)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)

    vocab = tokenizer.get_vocab()
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    special = set(tokenizer.all_special_tokens)
    merges = _merges(tokenizer)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([TOKEN_CONTROL if t in special else TOKEN_NORMAL for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    writer.add_pad_token_id(config.pad_token_id)
    writer.add_chat_template(tokenizer.chat_template)

    qtype = gguf.GGMLQuantizationType[quantization]
    for name, array in _tensors(model).items():
        if array.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, array.astype(np.float32))
        else:
            data = gguf.quants.quantize(array.astype(np.float32), qtype)
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _merges(tokenizer: PreTrainedTokenizerFast) -> list[str]:
    import json

    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    return [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]


def tiny_gguf(path: str | Path, quantization: str = "F32") -> tuple[Path, LlamaForCausalLM]:
    """A tiny Llama GGUF at `path` and the model it was written from."""
    tokenizer = build_bpe_tokenizer()
    model = tiny_llama(tokenizer)
    return write_gguf(model, tokenizer, path, quantization), model
