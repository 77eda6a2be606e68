"""The score-function estimator: its arithmetic, free of any module state (discounted returns, the
baselines: batch-relative, leave-one-out within a text's segmentations; the price that leaves the rate
alone, the surrogate losses, the prior's teacher targets), and `ScoreFunction`, which turns a step's
losses into the returns each decision learns from (docs/method.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from rltok.boundaries.base import decided_positions


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


def teacher_ends(cue: Tensor, decided: Tensor, rate: float) -> Tensor:
    """The prior's chunk ends for --prior-role teach: the decided positions whose cue is in the batch's
    top `rate` share (a parameter-free function of the model's own predictions)."""
    threshold = torch.quantile(cue[decided].float(), 1.0 - rate)
    return (cue > threshold) & decided


def smoothed(ends: Tensor, rate: float, eps: float) -> Tensor:
    """The teacher's targets under --teach-smoothing: 1 - eps at its chunk ends and eps x rate /
    (1 - rate) elsewhere, which keeps their mean at the rate where the ends are a `rate` share."""
    return torch.where(ends, 1.0 - eps, eps * rate / (1.0 - rate))


@dataclass
class ScoreFunction:
    """The returns G each decision is scored with, and where the policy learns: rewards are the full
    model's log-likelihood above the early-exit head's, centred on the other segmentations of the same
    text where there are several (the group estimator), else across the batch at each index (the
    paper's), optionally less a price per chunk end, then discounted over the bytes that follow."""

    gamma: float
    early_exit_reward: bool = True
    batch_relative: bool = True
    rate_neutral: bool = False
    grouped: bool = False  # the group estimator: no step between its rollouts
    greedy: bool = (
        False  # the batch's own rows are the policy's mode: only the rollouts are samples
    )
    sum_across: Callable[[Tensor], Tensor] | None = None  # global centering, under torchrun

    def returns(
        self,
        actions: Tensor,
        probs: Tensor,
        nll: Tensor,
        early_nll: Tensor,
        valid: Tensor,
        groups: Tensor | None,
        learning: bool,
    ) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        """(returns, the positions that learn, statistics) for a step's decisions and losses (rows, L);
        `groups` (rows,) names each row's text where some texts were segmented several times."""
        reward = -nll.detach().float()
        if self.early_exit_reward:  # the early-exit head sees no boundary: a baseline with no bias
            reward = reward + early_nll.detach().float()
        reward = reward * valid
        decided = decided_positions(valid)
        # one unit of price per chunk end, centred as the rewards are
        price = actions.float() * valid if self.rate_neutral else None
        if groups is not None:  # several segmentations of a text: centre on the others of its group
            samples = valid
            if self.greedy:
                # the batch's rows are the policy's mode, no sample of it: the rollouts learn, each
                # centred on the other rollouts of its text (the mode, which the language model
                # trained on, would score above them all and only add noise)
                extra = groups != torch.arange(len(groups), device=groups.device)
                samples = valid & extra[:, None]
            reward, signal = leave_one_out(reward, groups, samples)
            if price is not None:
                price = leave_one_out(price, groups, samples)[0]
            learns = decided & signal  # a text segmented once carries no signal; it must not dilute
        elif self.grouped or not learning:
            # the group estimator between its rollouts (the policy is confident): no score-function
            # step, since the paper's batch-relative fallback drifted confident policies off the word
            # edge; and none once the policy stops learning, where it would still reach the encoder
            learns = torch.zeros_like(decided)
        else:
            if self.batch_relative:
                reward = batch_relative(reward, valid, self.sum_across)
                if price is not None:
                    price = batch_relative(price, valid, self.sum_across)
            learns = decided
        returns = discounted_returns(reward, self.gamma, valid)
        if price is None:
            return returns, learns, {}
        priced = discounted_returns(price, self.gamma, valid)
        returns, lam = rate_neutral(returns, priced, actions, probs, learns)
        return returns, learns, {"boundary_price": lam}
