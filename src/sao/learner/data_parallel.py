"""Data-parallel learner ranks: which trajectories each rank trains, and the sums that make N
ranks take the update one process takes on the whole batch.

Every rank receives the whole batch and cuts out the same plan: each update's rows (the whole
batch for DIS, each PPO mini-batch) are split across the ranks by `balanced_partition` over the
trajectories' token counts, so the ranks compute about equal shares. A rank then

- normalises every loss by the GLOBAL count the loss divides by (action tokens for token-mean,
  trajectories with action tokens for seq-mean-token-mean; `RankGroup.scale_loss`), times the
  number of ranks, because FSDP2 averages the ranks' gradients: the averaged gradient is then
  the gradient of the whole batch's loss;
- reports metrics over the whole batch (`RankGroup.mean_metrics`), not its own part;
- runs as many forward passes as the busiest rank (`RankGroup.passes`), and a rank left
  without trajectories in an update trains a stand-in row whose action mask is zero: FSDP2's
  all-gathers and reduce-scatters are collectives, so every rank must run the same passes.

With one process (`RankGroup.size == 1`) every method is the plain single-process computation.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from sao.core.advantages import whiten
from sao.core.metrics import explained_variance, masked_mean, masked_variance
from sao.learner.chunking import Outputs, PackingCost, length_chunks, plan_packing
from sao.learner.sharding import world_size
from sao.trajectory import Batch

UNREDUCED_SUFFIXES = ("grad_norm", "grad_norm_shared", "grad_norm_all", "ppo_updates")
"""Metrics that are already the same on every rank (gradient norms over the sharded, reduced
gradients; counts of updates), so they are not averaged again."""

LOSS_METRICS = ("actor/pg_loss", "critic/vf_loss")
"""Metrics that are loss values: averaged with the loss's own normaliser as the weight."""


MIN_RETURN_VARIANCE = 1e-10
"""The floor below which `explained_variance` calls the returns constant (and answers NaN)."""


def tie_extra_passes(outputs: Outputs, extra: Sequence[Outputs]) -> Outputs:
    """`outputs` joined by a zero to the `extra` passes' outputs, so their graphs run backward
    too (an FSDP2 unit gathers its parameters again in each pass's backward) without changing a
    value or a gradient."""
    if not extra:
        return outputs
    tie = sum(_first(o).sum() for o in extra) * 0.0
    if isinstance(outputs, tuple):
        return tuple(o + tie if o.is_floating_point() else o for o in outputs)
    return outputs + tie


def _first(outputs: Outputs) -> Tensor:
    return outputs[0] if isinstance(outputs, tuple) else outputs


def balanced_partition(
    costs: Sequence[int], parts: int, earlier: Sequence[int] | None = None
) -> list[list[int]]:
    """Indices of `costs` split into `parts` lists of nearly equal total cost.

    Greedy longest-processing-time: largest cost first (ties: lower index first) onto the part
    with the least load so far (ties: the part with less `earlier` load, from other updates,
    then the lower part). Deterministic, every index in exactly one
    part, each part's indices ascending; the largest load is at most `sum / parts + max(costs)`
    (and within 4/3 of the best possible). Parts may be empty when `parts > len(costs)`.

    Raises:
        ValueError: if `parts < 1` or a cost is negative.
    """
    if parts < 1:
        raise ValueError(f"balanced_partition: parts must be >= 1, got {parts}")
    if any(c < 0 for c in costs):
        raise ValueError("balanced_partition: costs must be >= 0")
    before = list(earlier) if earlier is not None else [0] * parts
    if len(before) != parts:
        raise ValueError(f"balanced_partition: {len(before)} earlier loads for {parts} parts")
    heap = [(0, before[p], p) for p in range(parts)]
    heapq.heapify(heap)
    assigned: list[list[int]] = [[] for _ in range(parts)]
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        load, prior, p = heapq.heappop(heap)
        assigned[p].append(i)
        heapq.heappush(heap, (load + costs[i], prior, p))
    return [sorted(part) for part in assigned]


@dataclasses.dataclass(frozen=True)
class RankShare:
    """What one rank trains of a batch.

    Attributes:
        rows: the batch rows this rank holds, in its local order (a row may repeat as a
            stand-in, see `live`).
        live: per local row, False for a stand-in: a row held only so that an update with no
            trajectory for this rank still runs its passes; its action mask is zeroed.
        updates: the local row indices of each optimizer update, in order.
        tokens: tokens of the live rows on each rank (the same list on every rank).
    """

    rows: list[int]
    live: list[bool]
    updates: list[list[int]]
    tokens: list[int]

    def metrics(self) -> dict[str, float]:
        """How the batch's tokens were spread over the ranks: the busiest rank's tokens
        (`learner/rank_tokens_max`) and all ranks' together (`learner/rank_tokens_total`);
        equal with one rank."""
        return {
            "learner/rank_tokens_max": float(max(self.tokens)),
            "learner/rank_tokens_total": float(sum(self.tokens)),
        }

    def local_batch(self, batch: Batch) -> Batch:
        """This rank's rows of `batch`, trimmed to their longest, stand-ins masked out."""
        index = torch.tensor(self.rows, dtype=torch.long)
        width = max(1, int(batch.attention_mask[index].sum(dim=1).max()))
        picked = {f.name: getattr(batch, f.name)[index] for f in dataclasses.fields(batch)}
        trimmed = {k: v[:, :width] if v.dim() == 2 else v for k, v in picked.items()}
        live = torch.tensor(self.live, dtype=trimmed["action_mask"].dtype)
        trimmed["action_mask"] = trimmed["action_mask"] * live[:, None]
        return Batch(**trimmed)


def rank_share(
    lengths: Sequence[int], update_rows: Sequence[Sequence[int]], rank: int, ranks: int
) -> RankShare:
    """Rank `rank`'s share of a batch whose updates train `update_rows` (batch row indices,
    repeated rows being repeated epochs): each distinct update's rows are split by
    `balanced_partition` over `lengths` (ties going to the ranks with fewer tokens in the
    updates before, so small mini-batches do not all load the same rank), and an update this
    rank gets nothing of gets one stand-in row (the update's first)."""
    distinct: list[tuple[int, ...]] = []
    for rows in update_rows:
        if tuple(rows) not in distinct:
            distinct.append(tuple(rows))
    local_rows: list[int] = []
    live: list[bool] = []
    tokens = [0] * ranks
    local_of: dict[tuple[int, ...], list[int]] = {}
    for rows in distinct:
        parts = balanced_partition([lengths[r] for r in rows], ranks, tokens)
        for p, part in enumerate(parts):
            tokens[p] += sum(lengths[rows[i]] for i in part)
        mine = [rows[i] for i in parts[rank]]
        start = len(local_rows)
        local_rows += mine or [rows[0]]
        live += [True] * len(mine) or [False]
        local_of[rows] = list(range(start, len(local_rows)))
    updates = [local_of[tuple(rows)] for rows in update_rows]
    return RankShare(local_rows, live, updates, tokens)


class RankGroup:
    """This process's place among the learner's ranks (a group of one without a process group),
    and the reductions across them. Every method is a collective when `size > 1`: all ranks
    call the same methods in the same order."""

    def __init__(self, device: torch.device) -> None:
        self.size = world_size()
        self.rank = dist.get_rank() if self.size > 1 else 0
        self.device = device

    def share(self, lengths: Sequence[int], update_rows: Sequence[Sequence[int]]) -> RankShare:
        """This rank's share of the batch (see `rank_share`)."""
        return rank_share(lengths, update_rows, self.rank, self.size)

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums of `values` over the ranks (float64)."""
        if self.size == 1:
            return [float(v) for v in values]
        t = torch.tensor(list(values), dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def max(self, value: int) -> int:
        """The largest `value` over the ranks."""
        if self.size == 1:
            return value
        t = torch.tensor([value], dtype=torch.long, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    def passes(self, local: int) -> int:
        """How many forward passes every rank runs when this rank needs `local`."""
        return self.max(local)

    def match_passes(
        self,
        fn: Callable[..., Outputs],
        out: Outputs,
        lengths: Sequence[int],
        max_tokens: int,
        packing: PackingCost | None,
    ) -> Outputs:
        """`out` (what `fn(ids, attention_mask, positions)` gave over rows of `lengths` in
        passes of `max_tokens`: packed when `packing` is given, else length-sorted padded),
        after as many one-token passes as the busiest rank needs more than this one, tied in by
        `tie_extra_passes`."""
        if self.size == 1:
            return out
        one = torch.zeros(1, 1, dtype=torch.long, device=self.device)
        if packing is not None:
            local = len(plan_packing(lengths, max_tokens, packing))
            args = (one, None, one)  # one token at position 0
        else:
            local = len(length_chunks(lengths, max_tokens))
            args = (one, torch.ones_like(one), None)
        extra = [fn(*args) for _ in range(self.passes(local) - local)]
        return tie_extra_passes(out, extra)

    def padding_frac(self, real_tokens: int, frac: float) -> float:
        """The padding fraction of every rank's passes, from this rank's real tokens and the
        padding fraction of its own passes."""
        if self.size == 1:
            return frac
        real, computed = self.sum([real_tokens, real_tokens / (1.0 - frac)])
        return 1.0 - real / computed

    def scale_loss(self, loss: Tensor, action_mask: Tensor, agg: str) -> Tensor:
        """This rank's loss (normalised by its own count) rescaled so that FSDP2's average of the
        ranks' gradients is the gradient of the whole batch's loss. A loss that is not finite on
        any rank is not finite on all, so every rank skips the step together."""
        if self.size == 1:
            return loss
        local = normaliser(action_mask, agg)
        total_count, total_loss = self.sum([local, float(loss.detach()) * local])
        if not math.isfinite(total_loss):
            return torch.full_like(loss, math.nan)
        return loss * (self.size * max(local, 1.0) / max(total_count, 1.0))

    def mean_metrics(
        self, metrics: dict[str, float], action_mask: Tensor, agg: str
    ) -> dict[str, float]:
        """Per-rank metrics as the whole batch's: losses weighted by their normaliser, means
        over action tokens by the rank's action tokens; gradient norms and counts unchanged."""
        if self.size == 1:
            return dict(metrics)
        tokens = float((action_mask > 0).sum())
        keys = [k for k in metrics if not k.endswith(UNREDUCED_SUFFIXES)]
        weights = [normaliser(action_mask, agg) if k in LOSS_METRICS else tokens for k in keys]
        weighted = [w * metrics[k] if w > 0 else 0.0 for k, w in zip(keys, weights, strict=True)]
        sums = self.sum([*weighted, *weights])
        out = dict(metrics)
        for i, key in enumerate(keys):
            out[key] = sums[i] / sums[len(keys) + i] if sums[len(keys) + i] > 0 else 0.0
        return out

    def masked_mean(self, x: Tensor, mask: Tensor) -> float:
        """`masked_mean` over the whole batch."""
        if self.size == 1:
            return masked_mean(x, mask)
        m = mask > 0
        total, count = self.sum([float(x[m].double().sum()), float(m.sum())])
        return total / count if count > 0 else 0.0

    def masked_variance(self, x: Tensor, mask: Tensor) -> float:
        """`masked_variance` over the whole batch."""
        if self.size == 1:
            return masked_variance(x, mask)
        m = mask > 0
        total, count = self.sum([float(x[m].double().sum()), float(m.sum())])
        if count < 2:
            return math.nan
        (squares,) = self.sum([float(((x[m].double() - total / count) ** 2).sum())])
        return squares / count

    def whiten(self, x: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
        """`whiten` with the whole batch's mean and variance."""
        if self.size == 1:
            return whiten(x, mask, eps)
        m = mask > 0
        total, count = self.sum([float(x[m].double().sum()), float(m.sum())])
        if count == 0:
            return torch.zeros_like(x)
        mean = total / count
        (squares,) = self.sum([float(((x[m].double() - mean) ** 2).sum())])
        return torch.where(m, (x - mean) / math.sqrt(squares / count + eps), 0.0)

    def explained_variance(self, values: Tensor, returns: Tensor, mask: Tensor) -> float:
        """`explained_variance` over the whole batch."""
        if self.size == 1:
            return explained_variance(values, returns, mask)
        m = mask > 0
        r, d = returns[m].double(), (returns[m] - values[m]).double()
        n, sr, sd = self.sum([float(m.sum()), float(r.sum()), float(d.sum())])
        if n < 2:
            return math.nan
        squares = [float(((r - sr / n) ** 2).sum()), float(((d - sd / n) ** 2).sum())]
        var_r, var_d = (v / n for v in self.sum(squares))
        if var_r <= MIN_RETURN_VARIANCE:
            return math.nan
        return 1.0 - var_d / var_r


def normaliser(action_mask: Tensor, agg: str) -> float:
    """What `sao.core.losses.aggregate` divides by, before its clamp: the action tokens
    (token-mean) or the trajectories that have any (seq-mean-token-mean)."""
    mask = action_mask > 0
    if agg == "seq-mean-token-mean":
        return float((mask.sum(dim=1) > 0).sum())
    return float(mask.sum())
