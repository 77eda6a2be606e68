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


def mean_pool(x: Tensor, ends: Tensor) -> Tensor:
    """Downsample by averaging each chunk's bytes, (B, M, d); causal: chunk j only holds bytes <= its end."""
    total = x.float().cumsum(dim=1)
    at_end = total.gather(1, ends[..., None].expand(-1, -1, x.size(-1)))
    before = torch.cat([torch.zeros_like(at_end[:, :1]), at_end[:, :-1]], dim=1)
    starts = torch.cat([torch.full_like(ends[:, :1], -1), ends[:, :-1]], dim=1)
    # padded chunks repeat the last end: clamp their (zero) length to 1 to stay finite
    length = (ends - starts).clamp(min=1)[..., None]
    return ((at_end - before) / length).to(x.dtype)


def ema_over_chunks(y: Tensor, p: Tensor) -> Tensor:
    """z_j = p_j y_j + (1 - p_j) z_{j-1} along the chunk axis, in fp32, as one matrix product:
    z_j = sum_{i <= j} p_i prod_{i < k <= j} (1 - p_k) y_i."""
    with torch.autocast(y.device.type, enabled=False):
        p = p.float()
        # C_j = sum_{k <= j} log(1 - p_k)
        log_keep = torch.log1p(-p.clamp(max=1 - 1e-6)).cumsum(dim=1)
        lag = log_keep[:, :, None] - log_keep[:, None, :]  # [j, i] = C_j - C_i
        M = p.size(1)
        causal = torch.ones(M, M, dtype=torch.bool, device=p.device).tril()
        weights = torch.where(causal, lag, -torch.inf).exp() * p[:, None, :]
        return (weights @ y.float()).to(y.dtype)
