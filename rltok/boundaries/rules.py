"""Boundaries drawn without learning: the baselines that a learned policy must beat."""

from __future__ import annotations

import torch
from torch import Tensor

from rltok.boundaries.base import BoundaryMethod, Decision, force_first, uniform_noise
from rltok.config import BoundaryConfig


class UniformBoundaries(BoundaryMethod):
    """Exactly round(rate * L) chunk ends per sequence (BOS included) at uniformly random positions."""

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()
        self.rate = cfg.target_rate

    def forward(self, x: Tensor, ids: Tensor, noise: Tensor | None = None,
                forced: Tensor | None = None) -> Decision:
        if forced is not None:
            return Decision(boundaries=force_first(forced))
        noise = uniform_noise(noise, x)
        B, L = noise.shape
        extra = max(round(self.rate * L) - 1, 0)  # BOS is the first of them
        noise = noise.clone()
        noise[:, 0] = 2.0  # never drawn: it is already a boundary
        chosen = noise.topk(extra, dim=1, largest=False).indices
        boundaries = torch.zeros(B, L, dtype=torch.long, device=x.device).scatter_(1, chosen, 1)
        return Decision(boundaries=force_first(boundaries))
