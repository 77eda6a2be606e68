"""What a policy that reads bytes sees: the last n bytes at every position, and a small network of
their embeddings, so that whatever reads them decides the same way wherever the same bytes occur."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rltok.text import BOS


def byte_windows(ids: Tensor, n: int) -> Tensor:
    """(B, L, n): at each position the bytes t, t-1, ..., t-n+1 (BOS before the start)."""
    L = ids.size(1)
    return torch.stack([F.pad(ids, (k, 0), value=BOS)[:, :L] for k in range(n)], -1)


class LocalBytes(nn.Module):
    """Features of the last n bytes alone (their embeddings through one hidden layer): whatever reads
    them decides the same way wherever the same bytes occur."""

    def __init__(self, n: int, dim: int = 32, hidden: int = 64):
        super().__init__()
        self.n = n
        self.embed = nn.Embedding(BOS + 1, dim)
        self.mix = nn.Linear(n * dim, hidden)

    def forward(self, windows: Tensor) -> Tensor:
        """(..., n) byte ids -> (..., hidden) features."""
        return F.gelu(self.mix(self.embed(windows).flatten(-2)))
