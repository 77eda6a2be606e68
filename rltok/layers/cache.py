"""Key/value caches for incremental decoding: for each stack of attention layers, one ring of slots
per row, shared by its layers (they see the same positions).

A slot holds a key already rotated to its position, so attention over the cache is the same whatever
order the slots are in. A key is visible while its position is within `span` of the query's (the
attention window of the byte layers; the sequence length of the main network, a sliding context),
so a ring of `span` slots is enough and memory stays flat however long the text grows. The ring
starts small and doubles while no row has wrapped around it yet, so a main network that has seen
few chunks holds few slots.
"""

from __future__ import annotations

import torch
from torch import Tensor

EMPTY = -(1 << 62)  # the position of a slot never written: outside every span


class KVCache:
    """Keys and values of the `n_layers` layers of a stack for `batch` rows, each row written independently."""

    def __init__(
        self,
        n_layers: int,
        batch: int,
        n_heads: int,
        head_dim: int,
        span: int,
        device: torch.device,
        dtype: torch.dtype,
        initial: int = 64,
    ):
        slots = min(span, initial)
        self.k = torch.zeros(n_layers, batch, n_heads, slots, head_dim, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.positions = torch.full((batch, slots), EMPTY, dtype=torch.long, device=device)
        self.written = torch.zeros(batch, dtype=torch.long, device=device)
        self.every = torch.arange(batch, device=device)
        self.most_written = (
            0  # a bound on `written`, kept on the host so growing needs no device sync
        )
        self.span = span

    def _grow(self) -> None:
        """Double the ring (up to `span` slots); done before any row wraps, so slot i stays slot i."""
        extra = min(self.k.size(3), self.span - self.k.size(3))
        self.k = torch.cat(
            [self.k, self.k.new_zeros(*self.k.shape[:3], extra, self.k.size(4))], dim=3
        )
        self.v = torch.cat(
            [self.v, self.v.new_zeros(*self.v.shape[:3], extra, self.v.size(4))], dim=3
        )
        self.positions = torch.cat(
            [self.positions, self.positions.new_full((len(self.positions), extra), EMPTY)], dim=1
        )

    def advance(self, rows: Tensor | None, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Give each row of `rows` (None: every row) a slot for its new position (R,); return the slots
        (R,) and the visibility mask (R, 1, 1, S) of the rows' queries over the cache."""
        if self.k.size(3) < self.span and self.most_written >= self.k.size(3):
            self._grow()
        index = self.every if rows is None else rows
        slots = self.written[index] % self.k.size(3)
        self.positions[index, slots] = positions
        self.written[index] += 1
        self.most_written += 1
        seen = self.positions if rows is None else self.positions[rows]
        visible = (seen > positions[:, None] - self.span) & (seen <= positions[:, None])
        return slots, visible[:, None, None, :]

    def store(
        self, layer: int, rows: Tensor | None, slots: Tensor, k: Tensor, v: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Write one layer's new keys and values (R, H, D) into the slots; return that layer's keys and
        values (R, H, S, D) for the rows."""
        index = self.every if rows is None else rows
        self.k[layer, index, :, slots] = k.to(self.k.dtype)
        self.v[layer, index, :, slots] = v.to(self.v.dtype)
        if rows is None:  # every row: attend over the cache itself, no copy
            return self.k[layer], self.v[layer]
        return self.k[layer, rows], self.v[layer, rows]

    def nbytes(self) -> int:
        """Memory held by the cache."""
        return sum(
            t.numel() * t.element_size() for t in (self.k, self.v, self.positions, self.written)
        )
