"""The next-byte loss every network scores with."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def next_byte_nll(logits: Tensor, targets: Tensor, valid: Tensor | None = None) -> Tensor:
    """Per-position cross-entropy in nats, fp32, zero where there is no byte to predict (`valid`;
    every position when it is None)."""
    nll = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="none")
    return nll.view_as(targets) if valid is None else nll.view_as(targets) * valid
