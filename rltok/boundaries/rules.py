"""Boundaries drawn without learning: the baselines that a learned policy must beat."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rltok.boundaries.base import (
    BoundaryMethod,
    Decision,
    OnlineDecision,
    OnlineState,
    force_first,
    next_byte_entropy,
    uniform_noise,
)
from rltok.config import BoundaryConfig
from rltok.errors import UserError
from rltok.text import GOLD_END, GOLD_START, character_starts, space_like, word_start


class UniformBoundaries(BoundaryMethod):
    """Exactly round(rate * L) chunk ends per sequence (BOS included) at uniformly random positions."""

    online_note = "uniform boundaries: an exact count per sequence needs its length, so generation draws each as Bernoulli(rate)"

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()
        self.rate = cfg.target_rate

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
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

    def online(
        self,
        state: OnlineState,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor,
        t: int,
    ) -> OnlineDecision:
        return OnlineDecision((noise.to(x.device) < self.rate) | (t == 0))


class StrideBoundaries(BoundaryMethod):
    """A chunk end every round(1 / rate) bytes, counted from BOS (hourglass / MEGABYTE style)."""

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()
        self.stride = max(1, round(1 / cfg.target_rate))

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        if forced is not None:
            return Decision(boundaries=force_first(forced))
        positions = torch.arange(ids.size(1), device=ids.device).expand_as(ids)
        return Decision(boundaries=force_first(positions % self.stride == 0))

    def online(
        self,
        state: OnlineState,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor,
        t: int,
    ) -> OnlineDecision:
        return OnlineDecision(torch.full_like(ids, t % self.stride == 0, dtype=torch.bool))


@dataclass
class SpaceState(OnlineState):
    """Whether the byte before was space-like, per row (None before the first byte: BOS is)."""

    space: Tensor | None = None


class WhitespaceBoundaries(BoundaryMethod):
    """SpaceByte, causal: a chunk ends at a space-like byte that follows a byte that is not space-like.
    The rate is whatever the text gives."""

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()

    @staticmethod
    def ends(space: Tensor, previous: Tensor) -> Tensor:
        """Chunk ends from whether each byte and the one before it are space-like."""
        return space & ~previous

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        if forced is not None:
            return Decision(boundaries=force_first(forced))
        space = space_like(ids)
        previous = torch.cat([torch.ones_like(space[:, :1]), space[:, :-1]], dim=1)
        return Decision(boundaries=force_first(self.ends(space, previous)))

    def online_state(self) -> SpaceState:
        return SpaceState()

    def online(
        self, state: SpaceState, x: Tensor, ids: Tensor, early_logits: Tensor, noise: Tensor, t: int
    ) -> OnlineDecision:
        space = space_like(ids)
        previous = torch.ones_like(space) if state.space is None else state.space
        state.space = space
        return OnlineDecision(self.ends(space, previous) | (t == 0))


class WordStartBoundaries(WhitespaceBoundaries):
    """The same rule one byte later: a chunk ends on a word's first byte (not space-like, after a
    space-like byte), so the main network sees the first letter of the word it helps to spell. The
    segmentation H-Net and the RL policy often settle on at CPU scale."""

    ends = staticmethod(word_start)


def utf8_length(ids: Tensor) -> Tensor:
    """The length in bytes of the UTF-8 character each id would start (1 for ASCII, BOS, a stray
    continuation byte or an invalid lead byte)."""
    return (
        1
        + (ids >= 0xC0).long()
        + (ids >= 0xE0).long()
        + (ids >= 0xF0).long()
        - (ids >= 0xF8).long() * 3
    )


@dataclass
class CharState(OnlineState):
    """How many bytes of the current character are still to come, per row."""

    left: Tensor | None = None


class CharBoundaries(BoundaryMethod):
    """A chunk ends on the last byte of every UTF-8 character (told by its lead byte, so the rule is
    causal): one chunk per character, the natural unit of text written without spaces, at the text's
    own rate (a third of its bytes for Chinese, all of them for ASCII)."""

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        if forced is not None:
            return Decision(boundaries=force_first(forced))
        positions = torch.arange(ids.size(1), device=ids.device).expand_as(ids)
        lead = character_starts(ids)  # BOS too
        # the character a byte belongs to started at the last lead byte; it ends once all its bytes
        # are read (a stray continuation byte past that ends a character of its own)
        start = torch.where(lead, positions, 0).cummax(1).values
        length = utf8_length(ids.gather(1, start))
        return Decision(boundaries=force_first(positions - start + 1 >= length))

    def online_state(self) -> CharState:
        return CharState()

    def online(
        self, state: CharState, x: Tensor, ids: Tensor, early_logits: Tensor, noise: Tensor, t: int
    ) -> OnlineDecision:
        left = torch.zeros_like(ids) if state.left is None else state.left
        lead = character_starts(ids)
        # a lead byte starts a character; any other byte is one more of the current one
        left = torch.where(lead | (left == 0), utf8_length(ids) - 1, left - 1)
        state.left = left
        return OnlineDecision((left == 0) | (t == 0))


class GoldBoundaries(BoundaryMethod):
    """The oracle of corpora with gold word boundaries: a chunk ends on every gold word's first byte
    (as the word-start rule does where spaces mark words). No user has it without a segmenter, and it
    sees a little of the future: whether the byte just read starts a word depends, where the text is
    ambiguous, on what follows. The trainer and evaluation hand it the corpus's boundaries."""

    reads_gold = True
    name = "gold"
    gold_edge = GOLD_START  # which edge of each gold word the trainer hands it

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        if forced is None:
            raise UserError(
                f"--boundaries {self.name} ends chunks on the corpus's gold words, and this text "
                "has none: train and evaluate it on a corpus prepared with gold (rltok data prepare "
                "chinese or english-nospace)"
            )
        return Decision(boundaries=force_first(forced))

    def online(
        self,
        state: OnlineState,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor,
        t: int,
    ) -> OnlineDecision:
        raise UserError(
            "a model trained on gold boundaries cannot generate: new text has no gold annotation to "
            "end its chunks; score it with rltok eval on its corpus instead"
        )


class GoldEndBoundaries(GoldBoundaries):
    """The same oracle on the other edge: a chunk ends on every gold word's last byte (as the
    character rule ends one on every character's last byte), so each chunk is one whole word."""

    name = "gold-end"
    gold_edge = GOLD_END


class EntropyBoundaries(BoundaryMethod):
    """BLT-style: a chunk ends where the early-exit head is unsure of the next byte, i.e. its entropy
    exceeds a threshold: the one that would have hit the target rate on the previous optimizer step's
    batch (so decisions never see the current batch's future bytes, and every layout of a run decides
    alike). It is saved with the weights and logged."""

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()
        self.rate = cfg.target_rate
        self.register_buffer("threshold", torch.tensor(float("nan")))  # set by the first step

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        entropy = next_byte_entropy(early_logits)
        threshold = self.threshold.nan_to_num(0.0)  # before the first step: every byte ends a chunk
        boundaries = force_first(forced if forced is not None else entropy > threshold)
        # this batch's threshold travels to `end_step`, which commits it once the step is taken
        stats = (
            {"entropy_threshold": torch.quantile(entropy.flatten(), 1 - self.rate)}
            if self.training
            else {}
        )
        return Decision(boundaries=boundaries, stats=stats)

    def online(
        self,
        state: OnlineState,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor,
        t: int,
    ) -> OnlineDecision:
        return OnlineDecision(
            (next_byte_entropy(early_logits) > self.threshold.nan_to_num(0.0)) | (t == 0)
        )

    def losses(
        self,
        decision: Decision,
        nll: Tensor,
        early_nll: Tensor,
        valid: Tensor,
        groups: Tensor | None = None,
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        return {}, {k: v.detach() for k, v in decision.stats.items()}

    def end_step(self, stats: dict[str, Tensor]) -> None:
        """The next step decides with this step's threshold, averaged by the trainer over every
        micro-batch and rank."""
        if "entropy_threshold" in stats:
            self.threshold.copy_(stats["entropy_threshold"])
