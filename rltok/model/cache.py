"""Key/value caches for incremental decoding: one ring of slots per row and attention layer.

A slot holds a key already rotated to its position, so attention over the cache is the same whatever
order the slots are in. A key is visible while its position is within `span` of the query's (the
attention window of the byte layers; the sequence length of the main network, a sliding context),
so a ring of `capacity` slots is enough and memory stays flat however long the text grows.
"""

from __future__ import annotations

import torch
from torch import Tensor

EMPTY = -(1 << 62)  # the position of a slot never written: outside every span


class KVCache:
    """Keys and values of one attention layer for `batch` rows, each row written independently."""

    def __init__(self, batch: int, n_heads: int, head_dim: int, capacity: int, span: int,
                 device: torch.device, dtype: torch.dtype):
        self.k = torch.zeros(batch, n_heads, capacity, head_dim, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.positions = torch.full((batch, capacity), EMPTY, dtype=torch.long, device=device)
        self.written = torch.zeros(batch, dtype=torch.long, device=device)
        self.span = span

    def update(self, rows: Tensor, k: Tensor, v: Tensor, positions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Store one key/value (R, H, D) per row of `rows` (R,) at `positions` (R,); return the keys,
        values (R, H, S, D) and visibility mask (R, 1, 1, S) that the rows' queries attend over."""
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
