"""Length-sorted forward passes: one `[B, T]` result from several passes over trimmed rows.

A learner batch is right-padded to its longest trajectory. On multi-turn environments lengths
spread widely (code_repair: ~150 to ~1000 tokens), so half of a full-batch forward is padding.
`chunked_forward` sorts rows by length, cuts them into chunks of at most `max_tokens` padded
tokens, trims each chunk to its own longest row and stitches the outputs back into the batch's
order and width. Causal attention never lets a real token see right padding, so the result equals
one full-batch pass (up to float rounding), gradients included, while the compute and the
activation memory follow the real tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

Outputs = Tensor | tuple[Tensor, ...]


def length_chunks(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Row indices sorted by length, cut so each chunk's `rows * longest <= max_tokens`.

    A row longer than `max_tokens` still gets a chunk of its own.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens: must be >= 1, got {max_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    chunks: list[list[int]] = []
    current: list[int] = []
    for row in order:
        # Sorted ascending, so the row being added is the chunk's longest.
        if current and (len(current) + 1) * lengths[row] > max_tokens:
            chunks.append(current)
            current = []
        current.append(row)
    if current:
        chunks.append(current)
    return chunks


def chunked_forward(
    fn: Callable[[Tensor, Tensor], Outputs],
    input_ids: Tensor,
    attention_mask: Tensor,
    max_tokens: int,
) -> Outputs:
    """`fn(input_ids, attention_mask)` computed chunk by chunk over length-sorted, trimmed rows.

    Args:
        fn: maps right-padded `[n, L]` ids and mask to one `[n, L]` tensor or a tuple of them.
        input_ids: `[B, T]` right-padded token ids.
        attention_mask: `[B, T]`, 1 on real tokens.
        max_tokens: padded tokens per pass at most (see `length_chunks`).

    Returns:
        What `fn` returns on the whole batch: `[B, T]` tensors, zero past each row's length.
    """
    lengths = attention_mask.sum(dim=1).tolist()
    chunks = length_chunks(lengths, max_tokens)
    width = input_ids.shape[1]
    pieces: list[tuple[Tensor, ...]] = []
    returns_tuple = False
    for rows in chunks:
        index = torch.tensor(rows, device=input_ids.device)
        longest = max(1, max(lengths[r] for r in rows))
        out = fn(input_ids[index, :longest], attention_mask[index, :longest])
        returns_tuple = isinstance(out, tuple)
        outs = out if isinstance(out, tuple) else (out,)
        pieces.append(tuple(F.pad(o, (0, width - longest)) for o in outs))
    order = torch.tensor([r for rows in chunks for r in rows], device=input_ids.device)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order), device=order.device)
    stitched = tuple(torch.cat(parts)[inverse] for parts in zip(*pieces, strict=True))
    return stitched if returns_tuple else stitched[0]
