"""The score-function estimator's arithmetic, free of any module state: discounted returns, the
baselines (batch-relative, leave-one-out within a text's segmentations), the price that leaves the
rate alone, the surrogate losses, and the prior's teacher targets (docs/method.md)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor


def _decay(size: int, gamma: float, device: torch.device) -> Tensor:
    """(size, size) matrix M[k, t] = gamma^(k - t) for k >= t, else 0 (0 ** 0 == 1: gamma = 0 keeps the diagonal)."""
    k = torch.arange(size, device=device)
    lag = k[:, None] - k[None, :]
    return (
        torch.tensor(float(gamma), device=device)
        .pow(lag.clamp(min=0).float())
        .masked_fill(lag < 0, 0.0)
    )


def discounted_returns(rewards: Tensor, gamma: float, valid: Tensor, block: int = 64) -> Tensor:
    """G[b, t] = sum_{k >= t} gamma^(k - t) r[b, k] over valid k, in fp32 on the rewards' device. Within
    blocks of `block` positions by a small decay matrix, across blocks through the return at each
    block's first position, so the work grows as L x block, not L^2."""
    B, L = rewards.shape
    with torch.autocast(rewards.device.type, enabled=False):
        size = min(block, L)
        n = -(-L // size)
        r = F.pad(rewards.float() * valid, (0, n * size - L)).view(B, n, size)
        local = r @ _decay(size, gamma, r.device)  # the sum from t to the end of its block
        # G at each block's first position
        firsts = local[..., 0] @ _decay(n, gamma**size, r.device)
        after = F.pad(firsts[:, 1:], (0, 1))  # G where the next block starts (0 after the last)
        reach = torch.tensor(float(gamma), device=r.device).pow(
            size - torch.arange(size, device=r.device).float()
        )
        return (local + after[..., None] * reach).reshape(B, n * size)[:, :L]


def batch_relative(
    rewards: Tensor, valid: Tensor, sum_across: Callable[[Tensor], Tensor] | None = None
) -> Tensor:
    """Subtract, at each index, the mean reward over the sequences valid there; padding stays 0.
    `sum_across` adds the per-index sums of other batches (other ranks): the mean of the global batch."""
    valid = valid.float()
    totals = torch.stack([(rewards * valid).sum(dim=0), valid.sum(dim=0)])
    if sum_across is not None:
        totals = sum_across(totals)
    mean = totals[0] / totals[1].clamp(min=1.0)
    return (rewards - mean) * valid


def leave_one_out(rewards: Tensor, groups: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """Each row's reward minus the mean reward of the other rows of its text (same `groups` id) at the
    same index; also the mask of positions where another row of the text exists (elsewhere 0)."""
    valid = valid.float()
    rows = len(groups)  # at least the number of texts: no host sync to learn it, unused rows stay 0
    sums = rewards.new_zeros(rows, rewards.size(1)).index_add_(0, groups, rewards * valid)
    counts = valid.new_zeros(rows, valid.size(1)).index_add_(0, groups, valid)
    others = counts[groups] - valid
    # the mean of the others does not depend on this row's action, so the estimator stays unbiased
    mean_of_others = (sums[groups] - rewards * valid) / others.clamp(min=1.0)
    signal = (others > 0) & valid.bool()
    return (rewards - mean_of_others) * signal, signal


def rate_neutral(
    returns: Tensor, price: Tensor, actions: Tensor, probs: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    """returns - lam x price, the price's returns centred as the rewards were; lam, the price of one
    chunk end, is set so that the score-function step leaves the rate unchanged to first order:
    sum p (1 - p) (G - lam C) (a - p) = 0 over the masked positions. Also lam."""
    weight = probs * (1 - probs) * (actions.float() - probs) * mask.float()
    num, den = (returns * weight).sum(), (price * weight).sum()
    # den is positive in expectation (a chunk end's own price moves with its action)
    lam = torch.where(den > 0, num / den.clamp(min=1e-12), torch.zeros_like(den))
    return returns - lam * price, lam


def policy_entropy(probs: Tensor, mask: Tensor) -> Tensor:
    """Mean binary entropy of the boundary probabilities over the masked positions, in bits."""
    p = probs.float().clamp(1e-6, 1 - 1e-6)
    h = -(p * p.log2() + (1 - p) * (1 - p).log2())
    return (h * mask).sum() / mask.sum().clamp(min=1)


def policy_loss(logits: Tensor, actions: Tensor, returns: Tensor, mask: Tensor) -> Tensor:
    """-mean G * log pi(a) over the masked positions (the score-function surrogate)."""
    log_pi = -F.binary_cross_entropy_with_logits(logits, actions.float(), reduction="none")
    mask = mask.float()
    return -(returns.detach() * log_pi * mask).sum() / mask.sum().clamp(min=1.0)


def rate_loss(logits: Tensor, mask: Tensor, target: float) -> Tensor:
    """mean(l) * stopgrad(mean(p) - target): pushes every logit towards the target rate."""
    mask = mask.float()
    n = mask.sum().clamp(min=1.0)
    mean_logit = (logits * mask).sum() / n
    mean_prob = (torch.sigmoid(logits) * mask).sum() / n
    return mean_logit * (mean_prob - target).detach()


def mode_threshold(logits: Tensor, decided: Tensor, rate: float, softcap: float) -> Tensor:
    """The shift of the uncapped logits that leaves a `rate` share of the decided positions with
    p > 1/2: midway between the logits either side of the cut (no host sync)."""
    ranked = logits.float().masked_fill(~decided, -math.inf).flatten().sort(descending=True).values
    ends = (rate * decided.sum()).round().long().clamp(1, ranked.numel() - 1)
    cut = ranked.gather(0, torch.stack([ends - 1, ends])).mean()  # gathered: no host sync
    if softcap > 0:  # the offset acts before the cap, which keeps the order and 0
        cut = softcap * torch.atanh((cut / softcap).clamp(-0.999, 0.999))
    return cut


def teacher_ends(cue: Tensor, decided: Tensor, rate: float) -> Tensor:
    """The prior's chunk ends for --prior-role teach: the decided positions whose cue is in the batch's
    top `rate` share (a parameter-free function of the model's own predictions)."""
    threshold = torch.quantile(cue[decided].float(), 1.0 - rate)
    return (cue > threshold) & decided


def smoothed(ends: Tensor, rate: float, eps: float) -> Tensor:
    """The teacher's targets under --teach-smoothing: 1 - eps at its chunk ends and eps x rate /
    (1 - rate) elsewhere, which keeps their mean at the rate where the ends are a `rate` share."""
    return torch.where(ends, 1.0 - eps, eps * rate / (1.0 - rate))
