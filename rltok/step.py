"""One optimizer step, the same on one process and under torchrun: the learning-rate schedule, AdamW's
parameter groups, the micro-batches of each rank, gradient accumulation, and the step itself (skipped
when the loss or the gradient is not finite)."""

from __future__ import annotations

import math

import torch
from torch import nn

from rltok.config import Config
from rltok.objective import run_model, training_loss
from rltok.parallel import Parallel
from rltok.runtime import autocast, seed_of


def lr_factor(step: int, progress: float, cfg: Config) -> float:
    """Linear warm-up from 0.1x over warmup_steps, times a cosine over the run's progress in [0, 1]."""
    t = cfg.train
    warm = min(1.0, 0.1 + 0.9 * step / t.warmup_steps) if t.warmup_steps > 0 else 1.0
    cosine = t.min_lr_frac + (1 - t.min_lr_frac) * 0.5 * (
        1 + math.cos(math.pi * min(progress, 1.0))
    )
    return warm * cosine


def set_learning_rate(
    optimizer: torch.optim.Optimizer, cfg: Config, factor: float = 1.0, boundary: float = 1.0
) -> None:
    """The peak learning rate times the schedule's factor and each group's multiplier, the boundary
    method's group times `boundary` (its `lr_scale` at this step)."""
    for group in optimizer.param_groups:
        scale = group["lr_mult"] * (boundary if group.get("boundary") else 1.0)
        group["lr"] = cfg.train.lr * factor * scale


def make_optimizer(model: nn.Module, cfg: Config) -> torch.optim.AdamW:
    """AdamW with three groups: decayed matrices, undecayed vectors and embeddings, and the boundary
    method's parameters at their own learning-rate multiplier."""
    method = model.boundary_method
    boundary = set(id(p) for p in method.parameters())
    groups = {"decay": [], "no_decay": [], "boundary": []}
    for name, p in model.named_parameters():
        if id(p) in boundary:
            groups["boundary"].append(p)
        elif p.dim() >= 2 and "embed" not in name:
            groups["decay"].append(p)
        else:
            groups["no_decay"].append(p)
    t = cfg.train
    param_groups = [
        {"params": groups["decay"], "weight_decay": t.weight_decay, "lr_mult": 1.0},
        {"params": groups["no_decay"], "weight_decay": 0.0, "lr_mult": 1.0},
        {
            "params": groups["boundary"],
            "weight_decay": 0.0,
            "lr_mult": method.lr_mult,
            "boundary": True,
        },
    ]
    return torch.optim.AdamW([g for g in param_groups if g["params"]], lr=t.lr, betas=t.betas)


def micro_batch_seed(seed: int, step: int, index: int) -> int:
    """The seed of the boundary sampling of micro-batch `index` (over all ranks) of a step: a function of
    the step alone, so a resumed run, and any split of the batch over ranks, draws the same noise."""
    return seed_of(seed, step, index)


def my_micro_batches(
    inputs: torch.Tensor,
    targets: torch.Tensor,
    par: Parallel,
    accum: int,
    forced: torch.Tensor | None = None,
) -> list[tuple[int, torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    """This rank's accumulation steps, as (index over all ranks, inputs, targets, forced boundaries or
    None): consecutive slices of the global batch, rank 0 first, so 2 ranks x 1 step see what 1 rank
    x 2 steps sees."""
    size = len(inputs) // (par.world * accum)
    first = par.rank * accum
    return [
        (
            i,
            inputs[i * size : (i + 1) * size],
            targets[i * size : (i + 1) * size],
            None if forced is None else forced[i * size : (i + 1) * size],
        )
        for i in range(first, first + accum)
    ]


def accumulate_gradients(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: list,
    cfg: Config,
    par: Parallel,
    step: int,
) -> tuple[torch.Tensor, dict, torch.Tensor]:
    """Forward and backward over this rank's micro-batches (gradients summed, synced across ranks on
    the last), then clipping; returns the mean loss, its mean parts and the (global) gradient norm.
    The optimizer step is `finish_step`'s, once every rank's loss is known to be finite."""
    optimizer.zero_grad(set_to_none=True)
    boundary = model.boundary_method
    n = len(micro_batches)
    total, parts = 0.0, {}
    for a, (index, inputs, targets, forced) in enumerate(micro_batches):
        torch.manual_seed(micro_batch_seed(cfg.train.seed, step, index))
        valid = torch.ones_like(targets, dtype=torch.bool)
        rows = len(inputs)
        rollouts = boundary.rollouts(rows, cfg.train.batch_size, inputs.device)
        extra = 0 if rollouts is None else len(rollouts)
        noise = boundary.training_noise(rows, extra, inputs.size(1), inputs.device)
        with par.gradient_sync(model, enabled=a == n - 1):
            with autocast(inputs.device, cfg.train.precision):
                out, nll = run_model(
                    model,
                    inputs,
                    targets,
                    valid,
                    noise=noise,
                    rollouts=rollouts,
                    learn_rollouts=boundary.lm_on_rollouts,
                    boundaries=forced,
                )
            loss, micro_parts = training_loss(model, out, nll, targets, valid, cfg.loss)
            (loss / n).backward()
        # kept on the device: the caller syncs once per step
        total = total + loss.detach().float() / n
        for k, v in micro_parts.items():
            parts[k] = parts.get(k, 0.0) + v.detach().float() / n
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip)
    if hasattr(grad_norm, "full_tensor"):  # a DTensor under FSDP2: the norm over every shard
        grad_norm = grad_norm.full_tensor()
    return total, parts, grad_norm.detach().float()


def finish_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    parts: dict,
    grad_norm: torch.Tensor,
) -> str | None:
    """Step the optimizer and hand the step's statistics to the boundary method, or skip the step when
    the loss or the gradient is not finite and return the name of the culprit."""
    if bool(torch.isfinite(loss) & torch.isfinite(grad_norm)):
        optimizer.step()
        model.boundary_method.end_step(parts)
        return None
    optimizer.zero_grad(set_to_none=True)
    return next(
        (
            f"{k[5:]} loss"
            for k, v in parts.items()
            if k.startswith("loss_") and not torch.isfinite(v)
        ),
        "gradient",
    )


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    cfg: Config,
    step: int = 0,
) -> tuple[torch.Tensor, dict, torch.Tensor, str | None]:
    """One optimizer step of one process on a full batch; returns the loss, its parts, the gradient
    norm and the culprit of a skipped step."""
    loss, parts, grad_norm = accumulate_gradients(
        model, optimizer, [(0, inputs, targets, None)], cfg, Parallel(), step
    )
    return loss, parts, grad_norm, finish_step(model, optimizer, loss, parts, grad_norm)
