"""Moving between the byte sequence and the chunk sequence, loop-free.

Boundaries are integer masks: a[b, t] = 1 means a chunk ends at byte t. Position 0 (BOS) is always a
boundary, so every byte belongs to a chunk that ends at or before it. Indices are int64 throughout:
a cumulative sum in bf16 rounds above 256 and would silently corrupt them.

The two shaping features, pooling on the way down and smoothing on the way up, are written twice
side by side: over a whole sequence (training) and one byte at a time (decoding), which must agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rltok.layers.packing import Packing


def chunk_layout(boundaries: Tensor) -> tuple[Tensor, Packing]:
    """Byte positions of the chunk ends, (B, M) ascending and right-padded, and the packing of the
    real ones; the chunk counts come to the host in one sync, the only one."""
    B, L = boundaries.shape
    positions = torch.arange(L, device=boundaries.device).expand(B, L)
    # non-boundaries sort after every real position; a stable sort keeps the ends in byte order
    keyed = torch.where(boundaries.bool(), positions, L)
    ends = keyed.sort(dim=1).values
    counts = boundaries.long().sum(dim=1)
    sizes = counts.tolist()
    M = max(sizes)
    valid = torch.arange(M, device=boundaries.device) < counts[:, None]
    # a sequence holds at most L chunks, whatever this batch holds: a bound that never changes
    return ends[:, :M].clamp(max=L - 1), Packing.of(valid, sizes, longest=L)


def chunk_ends(boundaries: Tensor) -> tuple[Tensor, Tensor]:
    """Byte positions of the chunk ends, (B, M) ascending and right-padded, and their validity mask."""
    ends, packing = chunk_layout(boundaries)
    return ends, packing.valid


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


def pool(x: Tensor, ends: Tensor, pooling: str) -> Tensor:
    """Chunk vectors (B, M, d): each chunk's last byte ("last"), or the mean of its bytes ("mean")."""
    return select(x, ends) if pooling == "last" else mean_pool(x, ends)


@dataclass
class PoolState:
    """The bytes of each row's open chunk, summed (fp32) and counted: what mean pooling needs online."""

    total: Tensor  # (B, d)
    count: Tensor  # (B, 1)

    @classmethod
    def empty(cls, batch: int, d: int, device: torch.device) -> PoolState:
        """No bytes yet."""
        return cls(torch.zeros(batch, d, device=device), torch.zeros(batch, 1, device=device))

    def close(self, rows: Tensor) -> None:
        """The chunks of `rows` closed: their next chunk starts empty."""
        self.total[rows] = 0
        self.count[rows] = 0


def pool_step(x: Tensor, state: PoolState, pooling: str) -> Tensor:
    """The vector of the chunk that would close at this byte, x (B, d) the byte's encoder state: the
    byte itself, or the mean of the open chunk's bytes so far, as `pool` gives it."""
    if pooling == "last":
        return x
    state.total += x.float()
    state.count += 1
    return (state.total / state.count).to(x.dtype)


def smooth_step(y: Tensor, previous: Tensor, p: Tensor) -> Tensor:
    """One step of `ema_over_chunks`: a closing chunk's output y (R, d) blended into the previous
    smoothed output with its coefficient p (R,)."""
    p = p[:, None].float()
    return (p * y.float() + (1 - p) * previous.float()).to(y.dtype)


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
