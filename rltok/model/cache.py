"""Key/value caches for incremental decoding: one ring of slots per row and attention layer.

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
    """Keys and values of one attention layer for `batch` rows, each row written independently."""

    def __init__(self, batch: int, n_heads: int, head_dim: int, span: int, device: torch.device,
                 dtype: torch.dtype, initial: int = 64):
        slots = min(span, initial)
        self.k = torch.zeros(batch, n_heads, slots, head_dim, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.positions = torch.full((batch, slots), EMPTY, dtype=torch.long, device=device)
        self.written = torch.zeros(batch, dtype=torch.long, device=device)
        self.span = span

    def _grow(self) -> None:
        """Double the ring (up to `span` slots); called before any row wraps, so slot i stays slot i."""
        extra = min(self.k.size(2), self.span - self.k.size(2))
        self.k = torch.cat([self.k, self.k.new_zeros(*self.k.shape[:2], extra, self.k.size(3))], dim=2)
        self.v = torch.cat([self.v, self.v.new_zeros(*self.v.shape[:2], extra, self.v.size(3))], dim=2)
        self.positions = torch.cat([self.positions, self.positions.new_full((len(self.positions), extra), EMPTY)], dim=1)

    def update(self, rows: Tensor, k: Tensor, v: Tensor, positions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Store one key/value (R, H, D) per row of `rows` (R,) at `positions` (R,); return the keys,
        values (R, H, S, D) and visibility mask (R, 1, 1, S) that the rows' queries attend over."""
        if self.k.size(2) < self.span and int(self.written[rows].max()) >= self.k.size(2):
            self._grow()
        slot = self.written[rows] % self.k.size(2)
        self.k[rows, :, slot] = k.to(self.k.dtype)
        self.v[rows, :, slot] = v.to(self.v.dtype)
        self.positions[rows, slot] = positions
        self.written[rows] += 1
        seen = self.positions[rows]
        visible = (seen > positions[:, None] - self.span) & (seen <= positions[:, None])
        return self.k[rows], self.v[rows], visible[:, None, None, :]

    def nbytes(self) -> int:
        """Memory held by the cache."""
        return sum(t.numel() * t.element_size() for t in (self.k, self.v, self.positions, self.written))
