"""Learner forward passes over little padding: length-sorted padded rows, or packed rows.

A learner batch is right-padded to its longest trajectory. On multi-turn environments lengths
spread widely (code_repair: ~150 to ~1000 tokens), so half of a full-batch forward is padding.
`chunked_forward` sorts rows by length, cuts them into chunks of at most `max_tokens` padded
tokens, trims each chunk to its own longest row and stitches the outputs back into the batch's
order and width. Causal attention never lets a real token see right padding, so the result equals
one full-batch pass (up to float rounding), gradients included, while the compute and the
activation memory follow the real tokens. `packed_forward` goes further and puts several
sequences side by side in one row (`plan_packing` chooses how, priced by `PackingCost`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from sao.models.packed_attention import uses_packed_attention

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


# A token's compute outside attention, in units of one query-key pair of attention. A decoder
# layer spends about 13 * hidden**2 multiply-adds per token outside attention (projections, MLP or
# active experts) and 2 * hidden per query-key pair; for the tiny default policy (hidden 128, two
# active experts of width 128) the ratio is about 640, i.e. 5 * hidden.
DEFAULT_TOKEN_COST = 640.0


@dataclass(frozen=True)
class PackingCost:
    """What a packed row costs, in query-key pairs of attention (see `plan_packing`).

    Attributes:
        token_cost: a token's compute outside attention.
        segment_attention: the model attends segment by segment (`sao_packed` attention): a row
            costs about `sum(n_i**2)` attention over its sequences, not `W**2` over the whole
            row.
    """

    token_cost: float = DEFAULT_TOKEN_COST
    segment_attention: bool = False


def packing_cost_for(model: object, *others: object) -> PackingCost:
    """What a packed row costs when `model` (and `others`, if given) compute it.

    `DEFAULT_TOKEN_COST` scaled to `model`'s `config.hidden_size` (5 * hidden), if it has one;
    segment attention only if every model attends segment by segment
    (`sao.models.packed_attention`), since a plan is shared by all of them.
    """
    hidden = getattr(_config_of(model), "hidden_size", None)
    token_cost = 5.0 * hidden if isinstance(hidden, int) and hidden > 0 else DEFAULT_TOKEN_COST
    segments = all(uses_packed_attention(m) for m in (model, *others))
    return PackingCost(token_cost, segments)


def _config_of(model: object) -> object:
    return getattr(getattr(model, "backbone", model), "config", None)


def pack_rows(lengths: Sequence[int], rows: int) -> list[list[int]]:
    """Sequences spread over `rows` packed rows, longest first onto the least filled row.

    This greedy balancing (longest processing time first) makes the rows' fills nearly equal,
    so rows padded to the fullest one waste little.
    """
    if not 1 <= rows <= max(1, len(lengths)):
        raise ValueError(f"rows: must be between 1 and {len(lengths)}, got {rows}")
    heap = [(0, b) for b in range(rows)]
    bins: list[list[int]] = [[] for _ in range(rows)]
    for seq in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        fill, b = heapq.heappop(heap)
        bins[b].append(seq)
        heapq.heappush(heap, (fill + lengths[seq], b))
    return [b for b in bins if b]


def fill_rows(lengths: Sequence[int], width: int) -> list[list[int]]:
    """Sequences packed first-fit-decreasing into rows of at most `width` tokens (a longer
    sequence gets a row of its own)."""
    rows: list[list[int]] = []
    fills: list[int] = []
    for seq in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for r, fill in enumerate(fills):
            if fill + lengths[seq] <= width:
                rows[r].append(seq)
                fills[r] += lengths[seq]
                break
        else:
            rows.append([seq])
            fills.append(lengths[seq])
    return rows


def plan_packing(
    lengths: Sequence[int], max_tokens: int, cost: PackingCost = PackingCost()
) -> list[list[list[int]]]:
    """The passes `packed_forward` runs: each a list of packed rows, each a list of sequences.

    Tries every row count from 1 to one sequence per row (which is exactly `chunked_forward`'s
    plan) with `pack_rows`, and row widths from 1 to 2 times the longest sequence with
    `fill_rows`, keeps those whose rows fit in `max_tokens` (or hold one sequence), cuts the
    rows into passes of at most `max_tokens` tokens (`length_chunks` over the rows' fills) and
    keeps the cheapest plan. A pass of rows of width `W` costs `W * token_cost` a row plus its
    attention. With `sdpa` attention that is `W**2` a row: the block-diagonal mask hides, but
    does not skip, the other sequences' pairs, so wide rows of long sequences are not free and
    long code_repair-shaped batches keep about one sequence a row. With segment attention
    (`cost.segment_attention`) it is `sum(n_i**2)` over the row's sequences and its unused tail,
    so rows filled to the longest sequence, with almost no padding, are the cheapest.
    """
    longest = max(1, max(lengths))
    candidates = [pack_rows(lengths, rows) for rows in range(1, max(1, len(lengths)) + 1)]
    candidates += [fill_rows(lengths, longest + longest * k // 8) for k in range(9)]
    best: tuple[float, list[list[list[int]]]] | None = None
    for bins in candidates:
        fills = [sum(lengths[s] for s in b) for b in bins]
        if max(fills) > max(max_tokens, longest):
            continue  # a row wider than a pass may hold: only a sequence alone may be
        passes = [[bins[b] for b in chunk] for chunk in length_chunks(fills, max_tokens)]
        total = sum(_pass_cost(p, lengths, cost) for p in passes)
        if best is None or total < best[0]:
            best = (total, passes)
    assert best is not None
    return best[1]


def _pass_cost(rows: list[list[int]], lengths: Sequence[int], cost: PackingCost) -> float:
    fills = [sum(lengths[s] for s in row) for row in rows]
    width = max(1, max(fills))
    if not cost.segment_attention:
        return len(rows) * (width * cost.token_cost + width**2)
    pairs = sum(lengths[s] ** 2 for row in rows for s in row)
    pairs += sum((width - fill) ** 2 for fill in fills)
    return len(rows) * width * cost.token_cost + pairs


def _pass_tokens(rows: list[list[int]], lengths: Sequence[int]) -> int:
    return len(rows) * max(1, max(sum(lengths[s] for s in row) for row in rows))


def packed_forward(
    fn: Callable[[Tensor, Tensor], Outputs],
    input_ids: Tensor,
    attention_mask: Tensor,
    max_tokens: int,
    cost: PackingCost = PackingCost(),
) -> Outputs:
    """`fn` over the batch's sequences packed side by side, returned as right-padded `[B, T]`.

    The sequences are packed into rows, run in passes of at most `max_tokens` tokens
    (`plan_packing`, priced by `cost`). Inside a row each sequence's positions restart at 0,
    which makes the model attend block-diagonally (a token sees only the earlier tokens of its
    own sequence; with `sao_packed` attention each sequence is attended alone) with the same
    positions as alone: the result equals the padded computation up to float rounding, while
    the compute follows the real tokens (`packed_padding_frac`).

    Args:
        fn: maps `(input_ids [n, L], position_ids [n, L])` of packed rows to one `[n, L]` tensor
            or a tuple of them, token-aligned (column t belongs to token t). The model must run
            without a cache and without an attention mask so that it reads the sequence
            boundaries from the positions (Hugging Face decoders do).
        input_ids: `[B, T]` right-padded token ids.
        attention_mask: `[B, T]`, 1 on real tokens.
        max_tokens: tokens per pass at most (a longer row still runs, alone).
        cost: what a packed row costs this model (`packing_cost_for`; see `plan_packing`).

    Returns:
        What `fn` would return on each row alone, as `[B, T]` tensors, zero past each row's
        length and in each row's column 0 (which no earlier token predicts).
    """
    lengths = attention_mask.sum(dim=1).tolist()
    width = input_ids.shape[1]
    device = input_ids.device
    # Where each output position of the batch comes from in the flattened packed outputs; the
    # index one past the end reads an appended 0 (padding, and every sequence's column 0).
    source = torch.full((input_ids.shape[0], width), -1, dtype=torch.long)
    flat_outputs: list[tuple[Tensor, ...]] = []
    offset = 0
    returns_tuple = False
    for rows in plan_packing(lengths, max_tokens, cost):
        pass_width = max(1, max(sum(lengths[s] for s in row) for row in rows))
        ids = torch.zeros(len(rows), pass_width, dtype=input_ids.dtype)
        positions = torch.zeros(len(rows), pass_width, dtype=torch.long)
        for slot, row in enumerate(rows):
            start = 0
            for seq in row:
                n = lengths[seq]
                ids[slot, start : start + n] = input_ids[seq, :n].cpu()
                positions[slot, start : start + n] = torch.arange(n)
                base = offset + slot * pass_width + start
                source[seq, 1:n] = torch.arange(base + 1, base + n)
                start += n
            # The unused tail is a sequence of its own, so no real token attends to it.
            positions[slot, start:] = torch.arange(pass_width - start)
        out = fn(ids.to(device), positions.to(device))
        returns_tuple = isinstance(out, tuple)
        outs = out if isinstance(out, tuple) else (out,)
        flat_outputs.append(tuple(o.reshape(-1) for o in outs))
        offset += len(rows) * pass_width
    source[source < 0] = offset
    index = source.to(device)
    stitched = []
    for parts in zip(*flat_outputs, strict=True):
        flat = torch.cat([*parts, parts[0].new_zeros(1)])
        stitched.append(flat[index])
    return tuple(stitched) if returns_tuple else stitched[0]


def packed_padding_frac(
    lengths: Sequence[int], max_tokens: int, cost: PackingCost = PackingCost()
) -> float:
    """The fraction of the tokens `packed_forward` computes that are padding."""
    computed = sum(_pass_tokens(p, lengths) for p in plan_packing(lengths, max_tokens, cost))
    return 1.0 - sum(lengths) / computed


def chunked_padding_frac(lengths: Sequence[int], max_tokens: int) -> float:
    """The fraction of the tokens `chunked_forward` computes that are padding."""
    chunks = length_chunks(lengths, max_tokens)
    computed = sum(len(c) * max(1, max(lengths[r] for r in c)) for c in chunks)
    return 1.0 - sum(lengths) / computed
