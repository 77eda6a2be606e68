"""Moving between the byte sequence and the chunk sequence, loop-free.

Boundaries are integer masks: a[b, t] = 1 means a chunk ends at byte t. Position 0 (BOS) is always a
boundary, so every byte belongs to a chunk that ends at or before it. Indices are int64 throughout:
a cumulative sum in bf16 rounds above 256 and would silently corrupt them.
"""

from __future__ import annotations

import torch
from torch import Tensor


def chunk_ends(boundaries: Tensor) -> tuple[Tensor, Tensor]:
    """Byte positions of the chunk ends, (B, M) ascending and right-padded, and their validity mask."""
    B, L = boundaries.shape
    positions = torch.arange(L, device=boundaries.device).expand(B, L)
    # non-boundaries sort after every real position; a stable sort keeps the ends in byte order
    keyed = torch.where(boundaries.bool(), positions, L)
    ends = keyed.sort(dim=1).values
    counts = boundaries.long().sum(dim=1)
    M = int(counts.max())
    ends = ends[:, :M]
    valid = torch.arange(M, device=boundaries.device) < counts[:, None]
    return ends.clamp(max=L - 1), valid


def select(x: Tensor, ends: Tensor) -> Tensor:
    """Downsample: the vector of each chunk's last byte, (B, M, d)."""
    return x.gather(1, ends[..., None].expand(-1, -1, x.size(-1)))


def owning_chunk(boundaries: Tensor) -> Tensor:
    """For each byte, the index of the last chunk ending at or before it, (B, L) int64."""
    return boundaries.long().cumsum(dim=1) - 1


def distribute(y: Tensor, boundaries: Tensor) -> Tensor:
    """Upsample: byte t receives the main network's output for chunk owning_chunk(t), (B, L, d)."""
    index = owning_chunk(boundaries).clamp(min=0)
    return y.gather(1, index[..., None].expand(-1, -1, y.size(-1)))
