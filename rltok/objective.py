"""The training objective: weighted next-byte losses plus whatever terms the boundary method adds."""

from __future__ import annotations

import torch
from torch import Tensor

from rltok.config import LossWeights
from rltok.layers.loss import next_byte_nll
from rltok.model import ModelOutput


def masked_mean(values: Tensor, valid: Tensor) -> Tensor:
    """Mean over valid positions."""
    return (values * valid).sum() / valid.sum().clamp(min=1)


def run_model(
    model,
    inputs: Tensor,
    targets: Tensor,
    valid: Tensor,
    noise: Tensor | None = None,
    rollouts: Tensor | None = None,
    learn_rollouts: bool = False,
    boundaries: Tensor | None = None,
) -> tuple[ModelOutput, Tensor]:
    """The model's output on `inputs` and its per-position next-byte loss (nats) on `targets`;
    `rollouts` (R,) names rows to segment once more each, for the group estimator (`learn_rollouts`:
    with gradient, for the language-model loss); `boundaries` (B, L) imposes a segmentation (the
    gold oracle's)."""
    group = {} if rollouts is None else {"rollouts": rollouts, "learn_rollouts": learn_rollouts}
    if boundaries is not None:
        group["boundaries"] = boundaries.to(inputs.device)
    out = model(inputs, noise=noise, targets=targets, valid=valid, **group)
    return out, out.nll


def gold_forced(model, codes: Tensor | None) -> Tensor | None:
    """The segmentation a gold oracle is handed: chunk ends on the gold words' first bytes (or last,
    for `gold-end`), from the gold codes of the input bytes (B, L); None for every other method, and
    for text without gold (which the oracle refuses in one sentence)."""
    if codes is None or not model.boundary_method.reads_gold:
        return None
    return (codes & model.boundary_method.gold_edge) > 0


def with_rollouts(
    out: ModelOutput, nll: Tensor, early_nll: Tensor, targets: Tensor, valid: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """nll, early_nll and valid over every row of the decision (the batch, then its rollouts) and the
    text of each row; without rollouts, the inputs as they are and no groups."""
    if out.rollouts is None:
        return nll, early_nll, valid, None
    r = out.rollouts  # the extra segmentations score rewards only: they carry no LM loss
    nll = torch.cat([nll, next_byte_nll(out.rollout_logits, targets[r], valid[r])])
    groups = torch.cat([torch.arange(len(targets), device=r.device), r])
    return nll, torch.cat([early_nll, early_nll[r]]), torch.cat([valid, valid[r]]), groups


def training_loss(
    model,
    out: ModelOutput,
    nll: Tensor,
    targets: Tensor,
    valid: Tensor,
    weights: LossWeights,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Total loss and its detached parts (each term as loss_<name>, plus the method's statistics),
    given the model's output and its per-position next-byte loss."""
    terms = {"lm": masked_mean(nll, valid)}
    stats: dict[str, Tensor] = {}
    if out.early_logits is not None:
        early_nll = next_byte_nll(out.early_logits, targets, valid)
        terms["early"] = masked_mean(early_nll, valid)
        rows = with_rollouts(out, nll, early_nll, targets, valid)
        if rows[3] is not None and out.rollout_logits.requires_grad:
            # the language model learns from every segmentation of a text, each text weighing as one row
            all_nll, _, all_valid, groups = rows
            share = 1.0 / torch.bincount(groups).float()[groups]
            terms["lm"] = (all_nll * all_valid * share[:, None]).sum() / valid.sum().clamp(min=1)
        method_terms, stats = model.boundary_method.losses(out.decision, *rows)
        terms.update(method_terms)
    if out.boundaries is not None:
        stats["boundary_rate"] = out.boundaries[:, 1:].float().mean()
    loss = sum(getattr(weights, name) * value for name, value in terms.items())
    return loss, {**{f"loss_{name}": value.detach() for name, value in terms.items()}, **stats}
