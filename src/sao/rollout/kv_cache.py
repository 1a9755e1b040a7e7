"""A batched, right-aligned KV cache that rows can join and leave between decode steps.

All active sequences share one `[B, H, L, D]` key/value tensor per layer. Rows are right-aligned
(left-padded): every row's newest token sits in the same column, so one decode step appends one
column for the whole batch. An `attention_mask` over the `L` columns marks the padding.

Storage is a buffer with spare capacity on both sides of the live window `[start, end)`: a decode
step writes into the next free column instead of concatenating (which would copy the whole cache
every token), and dropping all-padding columns on the left only moves `start`.
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers.cache_utils import Cache, DynamicLayer


class SlotLayer(DynamicLayer):
    """One layer's keys and values, stored in a growable buffer `[B, H, capacity, D]`."""

    def __init__(self) -> None:
        super().__init__()
        self._key_buffer: Tensor | None = None
        self._value_buffer: Tensor | None = None
        self._start = 0
        self._end = 0

    def _publish(self) -> None:
        """Expose the live window as the `keys`/`values` views the attention code reads."""
        assert self._key_buffer is not None and self._value_buffer is not None
        self.keys = self._key_buffer[:, :, self._start : self._end]
        self.values = self._value_buffer[:, :, self._start : self._end]
        self.is_initialized = True

    def set_window(self, keys: Tensor, values: Tensor, spare: int = 64) -> None:
        """Replace the contents with `keys`/`values` `[B, H, L, D]`, leaving `spare` free columns."""
        batch, heads, length, dim = keys.shape
        self._key_buffer = keys.new_empty(batch, heads, length + spare, dim)
        self._value_buffer = values.new_empty(batch, heads, length + spare, dim)
        self._key_buffer[:, :, :length] = keys
        self._value_buffer[:, :, :length] = values
        self._start, self._end = 0, length
        self.device = keys.device
        self._publish()

    def update(
        self, key_states: Tensor, value_states: Tensor, *args: object, **kwargs: object
    ) -> tuple[Tensor, Tensor]:
        """Append `key_states`/`value_states` `[B, H, q, D]` and return the whole live window."""
        if self._key_buffer is None:
            self.set_window(key_states, value_states)
            return self.keys, self.values
        assert self._value_buffer is not None
        added = key_states.shape[-2]
        if self._end + added > self._key_buffer.shape[-2]:
            # Doubling keeps the cost of growth amortised O(1) per token.
            live = self._end - self._start
            self.set_window(self.keys, self.values, spare=max(64, live + added))
        self._key_buffer[:, :, self._end : self._end + added] = key_states
        self._value_buffer[:, :, self._end : self._end + added] = value_states
        self._end += added
        self._publish()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        """Number of live columns (padding included)."""
        return self._end - self._start

    def drop_left(self, columns: int) -> None:
        """Forget the `columns` oldest columns (they must be padding for every row)."""
        self._start += columns
        if self._key_buffer is not None:
            self._publish()

    def select_rows(self, rows: Tensor) -> None:
        """Keep only `rows` (a 1-D index tensor), in that order."""
        if self._key_buffer is None:
            return
        self.set_window(self.keys[rows], self.values[rows])


class SlotCache(Cache):
    """The batch cache: one `SlotLayer` per decoder layer plus the column padding mask."""

    def __init__(self, num_layers: int) -> None:
        super().__init__(layers=[SlotLayer() for _ in range(num_layers)])
        self.column_mask: Tensor = torch.zeros(0, 0, dtype=torch.long)

    @property
    def slot_layers(self) -> list[SlotLayer]:
        """The layers, typed."""
        return self.layers  # type: ignore[return-value]

    @property
    def width(self) -> int:
        """Number of cached columns `L` (padding included)."""
        return self.column_mask.shape[1]

    def select_rows(self, rows: Tensor) -> None:
        """Keep only the given rows, then drop left columns that became padding for every row."""
        for layer in self.slot_layers:
            layer.select_rows(rows)
        self.column_mask = self.column_mask[rows]
        self._drop_padding_columns()

    def _drop_padding_columns(self) -> None:
        if self.column_mask.shape[0] == 0:
            self.column_mask = self.column_mask[:, :0]
            for layer in self.slot_layers:
                layer.drop_left(layer.get_seq_length())
            return
        used = self.column_mask.any(dim=0)
        first_used = int(used.int().argmax()) if bool(used.any()) else self.width
        if first_used:
            self.column_mask = self.column_mask[:, first_used:]
            for layer in self.slot_layers:
                layer.drop_left(first_used)

    def append_rows(self, keys: list[Tensor], values: list[Tensor], column_mask: Tensor) -> None:
        """Add rows whose per-layer keys/values are `[n, H, L_new, D]` (right-aligned).

        The shorter side, old rows or new rows, is padded on the left to the common width.
        """
        width = max(self.width, column_mask.shape[1])
        old_rows = self.column_mask.shape[0]
        for layer, new_keys, new_values in zip(self.slot_layers, keys, values, strict=True):
            if old_rows:
                merged_keys = torch.cat([_pad_left(layer.keys, width), _pad_left(new_keys, width)])
                merged_values = torch.cat(
                    [_pad_left(layer.values, width), _pad_left(new_values, width)]
                )
            else:
                merged_keys, merged_values = (
                    _pad_left(new_keys, width),
                    _pad_left(new_values, width),
                )
            layer.set_window(merged_keys, merged_values)
        if old_rows:
            self.column_mask = torch.cat(
                [_pad_left_2d(self.column_mask, width), _pad_left_2d(column_mask, width)]
            )
        else:
            # Taken as given (not concatenated) so the mask lives on the rows' device.
            self.column_mask = _pad_left_2d(column_mask, width)

    def extend_mask(self) -> Tensor:
        """Mark one new (real) column for every row and return the updated `[B, L + 1]` mask."""
        ones = self.column_mask.new_ones(self.column_mask.shape[0], 1)
        self.column_mask = torch.cat([self.column_mask, ones], dim=1)
        return self.column_mask


def _pad_left(states: Tensor, width: int) -> Tensor:
    missing = width - states.shape[-2]
    if missing == 0:
        return states
    batch, heads, _, dim = states.shape
    return torch.cat([states.new_zeros(batch, heads, missing, dim), states], dim=-2)


def _pad_left_2d(mask: Tensor, width: int) -> Tensor:
    missing = width - mask.shape[1]
    if missing == 0:
        return mask
    return torch.cat([mask.new_zeros(mask.shape[0], missing), mask], dim=1)
