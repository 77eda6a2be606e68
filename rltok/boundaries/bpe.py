"""BPE guidance: chunks end where a byte-level BPE, trained on the training split, starts a token."""

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
)
from rltok.bpe import StoredBPE
from rltok.config import BoundaryConfig


@dataclass
class WalkState(OnlineState):
    """Each row's walk through the vocabulary: the token growing while its bytes are a prefix."""

    walks: list | None = None


class BPEBoundaries(BoundaryMethod):
    """a_t = 1 at the first byte of every BPE token (the token before ends at t - 1), with token starts
    decided causally from the bytes up to t (rltok.bpe.ByteBPE.causal_starts). The trainer fits the BPE
    (its size calibrated to the target rate unless --bpe-vocab fixes it) and stores it here."""

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()
        self.tokenizer = StoredBPE()

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
        bpe = self.tokenizer.get()
        starts = [bpe.causal_starts(row) for row in ids.tolist()]
        return Decision(boundaries=force_first(torch.tensor(starts, device=ids.device)))

    def online_state(self) -> WalkState:
        return WalkState()

    def online(
        self, state: WalkState, x: Tensor, ids: Tensor, early_logits: Tensor, noise: Tensor, t: int
    ) -> OnlineDecision:
        if state.walks is None:
            state.walks = [self.tokenizer.get().walk() for _ in range(len(ids))]
        return OnlineDecision(
            torch.tensor(
                [walk.push(i) for walk, i in zip(state.walks, ids.tolist())],
                dtype=torch.bool,
                device=ids.device,
            )
            | (t == 0)
        )
