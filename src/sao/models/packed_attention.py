"""Attention that computes packed rows segment by segment: `sum(n_i**2)` work, not `W**2`.

The learner packs several sequences side by side into one row, with positions restarting at 0
where each sequence starts and no attention mask (`sao.learner.chunking.packed_forward`). With
Hugging Face's `sdpa` attention that row gets a block-diagonal `[W, W]` mask: the result is
right, but the CPU kernel computes every query-key pair of the row and then hides the pairs
between different sequences, so a row of width `W` costs `W**2` attention however its sequences
are cut. Long sequences then pack no better than one per row.

`"sao_packed"` is registered with transformers' `AttentionInterface` (and, with no mask to build
for packed rows, with its `AttentionMaskInterface`). Called on a packed row (no mask, query and
key of the same length, `position_ids` restarting inside the row: the convention transformers'
own packed-sequence detection and flash-attention's variable-length path use), it runs causal
`scaled_dot_product_attention` on each segment alone and joins the outputs. Segments of similar
length share one call, each right-padded to the group's longest (causality keeps the padding
out of every real token's view), since a call per short segment costs more in dispatch than in
attention. Every other call (padded batches with a mask, generation with a cache, rows holding
one sequence) goes unchanged to transformers' `sdpa` attention, so a model switched to it
computes what `sdpa` computes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

PACKED_ATTENTION = "sao_packed"

# The fixed cost of one attention call (dispatch, slicing, joining), in query-key pairs. On CPU a
# causal sdpa call's forward and backward take about 80 us plus 0.02 us a pair (head_dim 32), so
# a call costs about 4,000 pairs before the slicing and joining around it.
CALL_COST_PAIRS = 8192


def packed_attention_forward(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    position_ids: Tensor | None = None,
    **kwargs: object,
) -> tuple[Tensor, None]:
    """Per-segment causal attention on packed rows; transformers' `sdpa` attention otherwise.

    Args:
        module: the attention module (read for its grouped-query settings by `sdpa`).
        query: `[B, heads, W, head_dim]`; key and value `[B, kv_heads, W, head_dim]`.
        attention_mask: None on packed rows; any mask sends the call to `sdpa`.
        position_ids: `[B, W]` or `[1, W]`; a row's segments start where a position is not
            the previous one plus 1.
        **kwargs: passed on to `sdpa_attention_forward` (dropout, scaling, ...).

    Returns:
        `([B, W, heads, head_dim], None)`, as transformers' attention functions return.
    """
    segments = _packed_segments(query, key, attention_mask, position_ids, kwargs)
    if segments is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    batch, heads, width, head_dim = query.shape
    flat = [
        t.transpose(1, 2).reshape(batch * width, t.shape[1], head_dim) for t in (query, key, value)
    ]
    outputs, sources = [], []
    for starts, lengths in _length_groups(segments, width):
        # Each segment right-padded to the group's longest by repeating its last token: under
        # a causal mask no real query sees what lies after it, so the padding changes nothing.
        longest = max(lengths)
        steps = torch.arange(longest, device=query.device)
        n = torch.tensor(lengths, device=query.device)[:, None]
        index = torch.tensor(starts, device=query.device)[:, None] + steps.minimum(n - 1)
        q, k, v = (t[index].transpose(1, 2) for t in flat)
        out = sdpa_attention_forward(module, q, k, v, None, **kwargs)[0]
        real = steps < n
        outputs.append(out[real])
        sources.append(index[real])
    source = torch.cat(sources)
    inverse = torch.empty_like(source)
    inverse[source] = torch.arange(len(source), device=source.device)
    return torch.cat(outputs)[inverse].view(batch, width, heads, -1), None


def _length_groups(segments: list[list[int]], width: int) -> list[tuple[list[int], list[int]]]:
    """Every segment as `(flat start, length)`, grouped by similar length, longest first.

    A segment joins the group of the next longer ones while padding it to their length adds
    fewer query-key pairs (`L**2 - n**2`) than a call of its own costs (`CALL_COST_PAIRS`).
    """
    spans = sorted(
        (
            (cuts[i + 1] - cuts[i], row * width + cuts[i])
            for row, cuts in enumerate(segments)
            for i in range(len(cuts) - 1)
        ),
        reverse=True,
    )
    groups: list[tuple[list[int], list[int]]] = []
    for length, start in spans:
        if not groups or groups[-1][1][0] ** 2 - length**2 > CALL_COST_PAIRS:
            groups.append(([], []))
        groups[-1][0].append(start)
        groups[-1][1].append(length)
    return groups


def _packed_segments(
    query: Tensor,
    key: Tensor,
    attention_mask: Tensor | None,
    position_ids: Tensor | None,
    kwargs: dict[str, object],
) -> list[list[int]] | None:
    """Each row's segment boundaries `[0, ..., W]`, or None when the call is not a packed one."""
    width = query.shape[2]
    if (
        attention_mask is not None
        or position_ids is None
        or key.shape[2] != width
        or width < 2
        or kwargs.get("sliding_window") is not None
        or kwargs.get("position_bias") is not None
    ):
        return None
    positions = position_ids.expand(query.shape[0], -1)
    if positions.shape[1] != width:
        return None
    starts = positions[:, 1:] != positions[:, :-1] + 1
    if not bool(starts.any()):
        return None
    rows, columns = (starts.nonzero() + torch.tensor([0, 1], device=starts.device)).T.tolist()
    segments = [[0] for _ in range(query.shape[0])]
    for row, column in zip(rows, columns, strict=True):
        segments[row].append(column)
    for cuts in segments:
        cuts.append(width)
    return segments


def packed_mask(batch_size: int, **kwargs: object) -> Tensor | None:
    """No mask for calls without a padding mask and without a cache; `sdpa`'s mask otherwise.

    Without a padding mask and a cache the attention function reads the segments from the
    positions itself, so no `[W, W]` mask is built for it. Mask functions a model overlays on
    the causal one (image tokens of vision-language models) are not applied on that path: this
    attention is for text decoders such as Qwen3 and Qwen3-MoE.

    transformers calls mask functions with keywords only, and which ones changed within 5.x: 5.0
    gives the queries as `cache_position` (their absolute positions), 5.17 and later as
    `q_length` and `q_offset`. Both are read here, and everything is passed on to `sdpa_mask`
    unchanged, so it gets the keywords its own version expects.
    """
    if kwargs.get("attention_mask") is None and _no_cache(kwargs):
        return None
    return sdpa_mask(batch_size=batch_size, **kwargs)


def _no_cache(kwargs: dict[str, object]) -> bool:
    """Whether a mask call's queries are the whole key range from position 0 (no cache)."""
    kv_length, kv_offset = kwargs.get("kv_length"), kwargs.get("kv_offset", 0)
    if "q_length" in kwargs:
        q_length, q_offset = kwargs["q_length"], kwargs.get("q_offset", 0)
    else:
        positions = kwargs.get("cache_position")
        if not isinstance(positions, Tensor) or positions.numel() == 0:
            return False
        q_length, q_offset = positions.numel(), int(positions[0])
    return q_offset == 0 and kv_offset == 0 and q_length == kv_length


AttentionInterface.register(PACKED_ATTENTION, packed_attention_forward)
AttentionMaskInterface.register(PACKED_ATTENTION, packed_mask)


def uses_packed_attention(model: nn.Module) -> bool:
    """Whether `model` (an HF model, or a module holding one as `backbone`) runs `"sao_packed"`."""
    config = getattr(getattr(model, "backbone", model), "config", None)
    return getattr(config, "_attn_implementation", None) == PACKED_ATTENTION


def use_packed_attention(model: nn.Module) -> bool:
    """Switch `model` to `"sao_packed"` attention if it computes packed rows right with it.

    A model whose attention does not take transformers' attention functions, or does not pass
    `position_ids` down to them, keeps its attention (and packed rows keep costing `W**2`). The
    check runs two short sequences packed in one row and compares them with each run alone.

    Args:
        model: an HF decoder (`PreTrainedModel`) or a `ValueModel` (its `backbone` is switched).

    Returns:
        True if the model now uses it.
    """
    backbone = getattr(model, "backbone", model)
    if not isinstance(backbone, PreTrainedModel):
        return False
    if uses_packed_attention(backbone):
        return True
    before = backbone.config._attn_implementation
    if getattr(backbone.config, "sliding_window", None) is not None:
        return False
    try:
        backbone.set_attn_implementation(PACKED_ATTENTION)
    except (ValueError, ImportError, NotImplementedError):
        return False
    if not uses_packed_attention(backbone) or not _packs_exactly(backbone):
        backbone.set_attn_implementation(before)
        return False
    return True


def _packs_exactly(model: PreTrainedModel) -> bool:
    """Two sequences in one packed row give what each gives alone (they would not, unsplit)."""
    base = model.base_model
    device = next(model.parameters()).device
    ids = torch.arange(7, device=device).remainder(model.config.vocab_size).unsqueeze(0)
    positions = torch.tensor([[0, 1, 2, 0, 1, 2, 3]], device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            packed, *alone = (
                base(
                    input_ids=ids[:, s], position_ids=positions[:, s], use_cache=False
                ).last_hidden_state.float()
                for s in (slice(0, 7), slice(0, 3), slice(3, 7))
            )
    finally:
        model.train(was_training)
    tolerance = 1e-4 if model.dtype == torch.float32 else 5e-2
    return torch.allclose(packed, torch.cat(alone, dim=1), atol=tolerance, rtol=tolerance)
