"""The surprisal prior of the RL policy: a cue read from the early-exit head's predictions, standardised
with the previous step's statistics, that either adds beta x itself to the policy's logits (decide) or
teaches the head the batch's top-rate positions of the cue (teach). A parameter-free function of the
model's own predictions, so the score-function estimator stays unbiased (docs/method.md)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rltok.boundaries.base import byte_surprisal, next_byte_entropy
from rltok.boundaries.estimator import smoothed, teacher_ends
from rltok.config import PriorConfig

# the keys of its statistics in the step's record (`measure` writes them, `end_step` reads them)
CUE_MEAN, CUE_STD = "early_entropy", "early_entropy_std"


class SurprisalPrior(nn.Module):
    """z_t, a standardised cue of the early-exit head: the entropy of its next-byte prediction, of the
    prediction of the byte just read, the drop from the second to the first, or its surprisal at the
    byte just read."""

    def __init__(self, cfg: PriorConfig):
        super().__init__()
        self.cfg = cfg
        self.teaches = cfg.role == "teach"
        # the cue's mean and std over the previous optimizer step's batch (unknown before the first)
        self.register_buffer("entropy_stats", torch.tensor([float("nan"), float("nan")]))

    def cue(self, early_logits: Tensor, ids: Tensor) -> Tensor:
        """The raw cue at every byte (B, L), in nats, without gradient."""
        if self.cfg.cue == "surprisal":
            return byte_surprisal(early_logits, ids)
        entropy = next_byte_entropy(early_logits)
        if self.cfg.cue == "entropy":
            return entropy
        read = F.pad(entropy[:, :-1], (1, 0))  # the entropy of the prediction of the byte just read
        return read if self.cfg.cue == "read-entropy" else read - entropy

    def logit_term(self, cue: Tensor) -> Tensor | float:
        """beta x the standardised cue, added to the policy's logits; 0 when the prior teaches."""
        if self.teaches:
            return 0.0  # the prior trains the head (`teach_loss`), the head alone decides
        mean, std = self.entropy_stats
        # before the first step the statistics are unknown (NaN) and the term is 0: chance
        return self.cfg.weight * ((cue - mean) / std).nan_to_num(0.0)

    def measure(self, cue: Tensor) -> dict[str, Tensor]:
        """This batch's cue statistics, which standardise the next step's cue."""
        return {CUE_MEAN: cue.mean(), CUE_STD: cue.std().clamp(min=1e-3)}

    def teach_loss(self, logits: Tensor, cue: Tensor, decided: Tensor, rate: float) -> Tensor:
        """Cross-entropy of the head's logits against the prior's chunk ends (the batch's top `rate`
        share of the cue, or of its negative for a negative beta), smoothed by `smoothing`."""
        signed = cue if self.cfg.weight > 0 else -cue
        target = smoothed(teacher_ends(signed, decided, rate), rate, self.cfg.smoothing)
        bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
        return (bce * decided).sum() / decided.sum().clamp(min=1)

    def end_step(self, stats: dict[str, Tensor]) -> None:
        """Keep the step's cue statistics (averaged over micro-batches and ranks by the trainer)."""
        self.entropy_stats.copy_(torch.stack([stats[CUE_MEAN], stats[CUE_STD]]).float())
