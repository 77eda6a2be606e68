"""How the RL policy holds its boundary rate: the paper's rate loss on every logit, or one shared offset
of the logits calibrated after each step so that the mean probability hits the rate."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rltok.boundaries.estimator import rate_loss

MEAN_PROB, SLOPE = (
    "mean_prob",
    "mean_prob_slope",
)  # keys of the step's record that calibration reads


class RateLoss(nn.Module):
    """The paper's rate loss: mean(l) x stopgrad(mean(p) - rate), which also trains the head and the
    encoder; the logits carry no offset."""

    offset = 0.0

    def terms(self, logits: Tensor, decided: Tensor, rate: float) -> dict[str, Tensor]:
        """The rate loss term."""
        return {"rate": rate_loss(logits, decided, rate)}

    def measure(self, probs: Tensor, decided: Tensor) -> dict[str, Tensor]:
        """Nothing beyond the mean probability the policy logs anyway."""
        return {}

    def end_step(self, stats: dict[str, Tensor], rate: float) -> None:
        """Nothing carried between steps."""


class CalibratedOffset(nn.Module):
    """One offset shared by every logit, moved after each step by a Newton step on mean p = rate; no
    loss term, so no gradient from the rate reaches the head or the encoder."""

    def __init__(self):
        super().__init__()
        self.register_buffer("rate_offset", torch.zeros(()))

    @property
    def offset(self) -> Tensor:
        """The shift of every logit, before the softcap."""
        return self.rate_offset

    def terms(self, logits: Tensor, decided: Tensor, rate: float) -> dict[str, Tensor]:
        """No loss term."""
        return {}

    def measure(self, probs: Tensor, decided: Tensor) -> dict[str, Tensor]:
        """d mean_prob / d offset over the decided positions, for the Newton step."""
        n = decided.sum().clamp(min=1)
        return {SLOPE: (probs * (1 - probs) * decided).sum() / n}

    def end_step(self, stats: dict[str, Tensor], rate: float) -> None:
        """mean_prob(offset) is increasing, so Newton's step on mean_prob = rate; bounded, since the
        slope is tiny when the policy is confident."""
        step = (rate - stats[MEAN_PROB]) / stats[SLOPE].clamp(min=1e-3)
        self.rate_offset.add_(step.float().clamp(-1.0, 1.0))


def rate_control(name: str) -> RateLoss | CalibratedOffset:
    """The controller a policy's `rate_control` setting names."""
    return CalibratedOffset() if name == "calibrate" else RateLoss()
