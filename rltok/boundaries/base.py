"""The one interface every boundary method implements, so the trainer never asks which method it runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn


@dataclass
class Decision:
    """Where chunks end, and (for learned methods) the policy that chose it."""

    boundaries: Tensor  # (B, L) int64; 1 = a chunk ends at this byte; position 0 is always 1
    logits: Tensor | None = None  # (B, L) fp32 boundary logits, differentiable, for learned methods
    probs: Tensor | None = None  # (B, L) boundary probabilities, for inspection
    # straight-through methods: their differentiable boundary values, and how they shape the chunking
    soft: Tensor | None = None  # (B, L) soft boundary values that the losses differentiate
    pooling: str = "last"  # chunk vector: "last" byte of the chunk, or "mean" of its bytes
    # (B, L) multiplies each chunk vector at its end byte (value 1, straight-through gradient)
    gate: Tensor | None = None
    smoothing: Tensor | None = None  # (B, L) EMA coefficient of each chunk end on the way up
    # (B, L) multiplies each byte's upsampled vector (value 1, straight-through gradient)
    confidence: Tensor | None = None
    stats: dict[str, Tensor] = field(default_factory=dict)  # measured while deciding, for `losses`

    def rows(self, index: slice) -> Decision:
        """The same decision restricted to some rows."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return type(self)(
            **{k: v[index] if isinstance(v, Tensor) else v for k, v in fields.items()}
        )


@dataclass
class OnlineDecision:
    """One position's decision for every row of a batch, made while the bytes arrive (generation)."""

    boundaries: Tensor  # (B,) bool: a chunk ends at this byte
    probs: Tensor | None = None  # (B,) boundary probabilities, where the method has them
    pooling: str = "last"  # as in Decision
    smoothing: Tensor | None = None  # (B,) as in Decision


@dataclass
class OnlineState:
    """What a method carries from one position to the next while it decides online (generation):
    nothing, for methods that decide each byte from that byte alone; subclasses name what they keep."""


class StepCount(nn.Module):
    """Optimizer steps taken, for a method whose behaviour follows them. A buffer keeps the count, so
    checkpoints and resumes carry it; a Python copy of it spares a host sync per forward."""

    def __init__(self):
        super().__init__()
        self._steps: int | None = 0  # None: read the buffer once (after a load)
        self.register_buffer("steps", torch.zeros(()))
        self.register_load_state_dict_post_hook(lambda module, _: setattr(module, "_steps", None))

    def taken(self) -> int:
        """Optimizer steps taken."""
        if self._steps is None:
            self._steps = int(self.steps)
        return self._steps

    def step(self) -> None:
        """One optimizer step taken."""
        self.steps.add_(1.0)
        self._steps = None if self._steps is None else self._steps + 1


class BoundaryMethod(nn.Module):
    """Decides chunk ends from the encoder output; may add loss terms of its own."""

    lr_mult = 1.0  # learning-rate multiplier of the method's own parameters
    online_note: str | None = None  # how online decisions differ from training's, where they do
    draws_boundaries = True  # False for the reference models' stand-in, which draws none
    # the language model trains on the policy's mode, so evaluation, segmentation and generation
    # read the boundaries greedily too
    reads_greedily = False
    lm_on_rollouts = False  # the language model also trains on the rollouts' segmentations
    # its chunks are the corpus's gold word boundaries, which the trainer and evaluation pass in as
    # the forced segmentation
    reads_gold = False

    def lr_scale(self, step: int) -> float:
        """The multiplier of the method's learning rate at optimizer step `step`."""
        return 1.0

    def training_noise(
        self, rows: int, rollouts: int, length: int, device: torch.device
    ) -> Tensor | None:
        """The uniforms (rows + rollouts, length) that a training micro-batch of `rows` texts and
        `rollouts` extra segmentations decides with; None: the method draws its own."""
        return None

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        """Boundaries for encoder states x (B, L, d) of bytes `ids`, given the early-exit head's logits;
        `noise` (B, L) uniforms make sampling reproducible; `forced` (B, L) imposes a segmentation
        (its probabilities are still reported)."""
        raise NotImplementedError

    def losses(
        self,
        decision: Decision,
        nll: Tensor,
        early_nll: Tensor,
        valid: Tensor,
        groups: Tensor | None = None,
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """Named loss terms (weighted by the trainer) and detached scalar statistics, given per-position
        next-byte losses of the full model and the early-exit head, both (rows, L); `groups` (rows,)
        names the text of each row when some texts were segmented several times."""
        return {}, {}

    def end_step(self, stats: dict[str, Tensor]) -> None:
        """Called by the trainer after each optimizer step with the step's statistics (from `losses`,
        averaged over micro-batches and ranks); methods that carry state between steps update it here."""

    def rollouts(self, rows: int, batch_size: int, device: torch.device) -> Tensor | None:
        """Rows of a micro-batch of `rows` texts (of a batch of `batch_size`) to segment once more each,
        for an estimator that compares several segmentations of a text; None: one segmentation each."""
        return None

    def share_across(self, sum_across: Callable[[Tensor], Tensor]) -> None:
        """Given once before training: the sum of a tensor over every rank of the run (the identity on
        one process), for a method that centres statistics over the global batch."""

    def carried_state(self) -> dict[str, float]:
        """What the method carries from step to step besides its weights and buffers; the trainer saves
        it with each checkpoint's training state and hands it back through `restore_state`."""
        return {}

    def restore_state(self, state: dict) -> None:
        """Take back what `carried_state` gave, from a checkpoint's training state."""

    def online_state(self) -> OnlineState:
        """A fresh state for a batch that starts deciding online at position 0."""
        return OnlineState()

    def online(
        self,
        state: OnlineState,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor,
        t: int,
    ) -> OnlineDecision:
        """The decision at position t from that position alone: encoder states x (B, d) of bytes `ids`
        (B,), the early-exit logits (B, V) and uniforms `noise` (B,); `state` (from `online_state`)
        carries what the method needs from earlier positions. Equals forward() at t for fixed noise."""
        raise NotImplementedError(f"{type(self).__name__} cannot decide online")


class NoBoundaries(BoundaryMethod):
    """The boundary method of the reference models (flat bytes, BPE tokens): it draws none, and every
    hook of the interface is a no-op."""

    draws_boundaries = False


NO_BOUNDARIES = NoBoundaries()


def mode_noise(shape: tuple[int, ...], device: torch.device | str | None = None) -> Tensor:
    """Uniforms of 1/2: a Bernoulli policy that decides with them takes its mode, a = [p > 0.5]."""
    return torch.full(shape, 0.5, device=device)


def uniform_noise(noise: Tensor | None, like: Tensor) -> Tensor:
    """The caller's uniforms, or fresh ones from the global generator, shaped like `like` (B, L)."""
    if noise is None:
        return torch.rand(like.shape[:2], device=like.device)
    return noise.to(like.device, torch.float32)


def force_first(boundaries: Tensor) -> Tensor:
    """int64 copy of the mask with the BOS position marked as a chunk end."""
    boundaries = boundaries.long().clone()
    boundaries[:, 0] = 1
    return boundaries


def straight_through(soft: Tensor) -> Tensor:
    """1 in the forward pass, the gradient of `soft` in the backward pass."""
    return 1.0 + soft - soft.detach()


def next_byte_entropy(logits: Tensor) -> Tensor:
    """Entropy in nats of the next-byte distributions (...), without gradient."""
    logp = torch.log_softmax(logits.detach().float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def byte_surprisal(logits: Tensor, ids: Tensor) -> Tensor:
    """-log p(ids[t] | bytes < t) in nats (B, L) under next-byte logits (B, L, V), 0 at the first
    position, without gradient: how unexpected each byte was when it was read."""
    logp = torch.log_softmax(logits[:, :-1].detach().float(), dim=-1)
    surprisal = -logp.gather(-1, ids[:, 1:, None].long())[..., 0]
    return torch.nn.functional.pad(surprisal, (1, 0))


def decided_positions(valid: Tensor) -> Tensor:
    """The positions where a method chose: valid ones except BOS, whose boundary is forced."""
    decided = valid.clone()
    decided[:, 0] = False
    return decided
