"""Boundaries trained by straight-through estimators: the two published alternatives to the RL policy
(docs/method.md). Both put their differentiable part in the Decision; the U-Net applies it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rltok.boundaries.base import (
    BoundaryMethod,
    Decision,
    OnlineDecision,
    OnlineState,
    decided_positions,
    force_first,
    straight_through,
    uniform_noise,
)
from rltok.config import BoundaryConfig
from rltok.layers.blocks import rms_norm


def _decided_mean(values: Tensor, valid: Tensor) -> Tensor:
    decided = decided_positions(valid)
    return (values * decided).sum() / decided.sum().clamp(min=1)


class NawrotBoundaries(BoundaryMethod):
    """Dynamic pooling: an MLP predictor, a Gumbel-sigmoid sample at temperature 1 thresholded at 0.5,
    mean pooling of each chunk, and a binomial prior that holds the rate. The hard decision passes the
    gradient of the soft one straight through, by scaling each chunk vector at its end byte."""

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()
        self.rate = cfg.target_rate
        self.mlp = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), nn.Linear(d_model, 1))
        nn.init.zeros_(self.mlp[2].weight)
        nn.init.constant_(self.mlp[2].bias, math.log(cfg.target_rate / (1 - cfg.target_rate)))

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        logits, soft = self._soft(x, uniform_noise(noise, x))
        boundaries = force_first(forced if forced is not None else soft > 0.5)
        return Decision(
            boundaries=boundaries,
            soft=soft,
            probs=torch.sigmoid(logits.detach()),
            pooling="mean",
            gate=straight_through(soft),
        )

    def _soft(self, x: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
        """Predictor logits and the Gumbel-sigmoid sample for uniforms u."""
        logits = self.mlp(rms_norm(x))[..., 0].float()
        u = u.to(logits.device).clamp(1e-6, 1 - 1e-6)
        # logistic noise oriented so that the hard decision is [u < p], as for the RL policy
        return logits, torch.sigmoid(logits + torch.log1p(-u) - torch.log(u))

    def online(
        self,
        state: OnlineState,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor,
        t: int,
    ) -> OnlineDecision:
        logits, soft = self._soft(x, noise)
        return OnlineDecision((soft > 0.5) | (t == 0), torch.sigmoid(logits), pooling="mean")

    def losses(
        self,
        decision: Decision,
        nll: Tensor,
        early_nll: Tensor,
        valid: Tensor,
        groups: Tensor | None = None,
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """Negative log-likelihood per byte of the boundary count under Binomial(n, rate); the count is
        the hard one, with the soft gradient passed straight through (E[soft] is not the hard rate)."""
        decided = decided_positions(valid)
        hard = decision.boundaries.float() + decision.soft - decision.soft.detach()
        k = (hard * decided).sum(dim=1)
        n = decided.sum(dim=1).float()
        log_prob = (
            torch.lgamma(n + 1)
            - torch.lgamma(k + 1)
            - torch.lgamma(n - k + 1)
            + k * math.log(self.rate)
            + (n - k) * math.log(1 - self.rate)
        )
        prior = -(log_prob / n.clamp(min=1)).mean()
        return {"prior": prior}, {"mean_prob": _decided_mean(decision.probs, valid)}


@dataclass
class RouterState(OnlineState):
    """The encoder state of the byte before, per row, which the router compares each byte with."""

    previous: Tensor | None = None


class HNetBoundaries(BoundaryMethod):
    """H-Net dynamic chunking: p_t = (1 - cos(W_q x_t, W_k x_{t-1})) / 2 with identity-initialised
    projections, a chunk end where p_t > 0.5, EMA smoothing of the chunk outputs on the way up, each
    byte's share scaled by a straight-through confidence, and the ratio loss that aims at 1/N = rate."""

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()
        self.n = 1 / cfg.target_rate
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        with torch.no_grad():
            self.q.weight.copy_(torch.eye(d_model))
            self.k.weight.copy_(torch.eye(d_model))

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        p = torch.cat(
            [x.new_ones(len(x), 1, dtype=torch.float32), self._prob(x[:, 1:], x[:, :-1])], dim=1
        )
        boundaries = force_first(forced if forced is not None else p > 0.5)  # BOS: always an end
        confidence = torch.where(boundaries.bool(), p, 1 - p)
        return Decision(
            boundaries=boundaries,
            soft=p,
            probs=p.detach(),
            smoothing=p,
            confidence=straight_through(confidence),
        )

    def _prob(self, x: Tensor, previous: Tensor) -> Tensor:
        """Boundary probability of each state x given the state before it."""
        cos = F.cosine_similarity(self.q(x).float(), self.k(previous).float(), dim=-1)
        return ((1 - cos) / 2).clamp(0, 1)

    def online_state(self) -> RouterState:
        return RouterState()

    def online(
        self,
        state: RouterState,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor,
        t: int,
    ) -> OnlineDecision:
        # the EMA over chunk outputs is carried by the decoder; here only the previous state
        p = self._prob(x, state.previous) if t > 0 else x.new_ones(len(x), dtype=torch.float32)
        state.previous = x
        return OnlineDecision((p > 0.5) | (t == 0), p, smoothing=p)

    def losses(
        self,
        decision: Decision,
        nll: Tensor,
        early_nll: Tensor,
        valid: Tensor,
        groups: Tensor | None = None,
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """N/(N-1) [(N-1) F G + (1-F)(1-G)]: F the fraction of chunk ends (hard), G the mean p."""
        f = _decided_mean(decision.boundaries.float(), valid).detach()
        g = _decided_mean(decision.soft, valid)
        n = self.n
        ratio = n / (n - 1) * ((n - 1) * f * g + (1 - f) * (1 - g))
        return {"ratio": ratio}, {"mean_prob": g.detach()}
