"""Analytic training FLOPs per byte for every model, and model-FLOPs utilisation on known GPUs."""

from __future__ import annotations

import torch
from torch import nn

from rltok.layers.blocks import Stack

# dense bf16 peak FLOP/s of one device, by a part of its name
PEAK_BF16 = {
    "H200": 989e12,
    "H100": 989e12,
    "A100": 312e12,
    "L40S": 362e12,
    "L4": 121e12,
    "A10": 125e12,
}


def flops_per_byte(model: nn.Module, rate: float | None, seq_len: int) -> float:
    """Training FLOPs per byte, forward and backward (3x the forward's 2 per multiply-add): 6 per weight
    touched, plus 12 x context x width per attention layer for scores and mixing (context: the window of
    a byte layer, half the rows of a full-attention layer). The main network (and every layer of the
    BPE-token model) runs once per chunk (token), a `rate` share of the bytes; the head is counted once
    per byte, as a weight."""
    rate = rate or 0.0
    per_token = model.tokenizer is not None  # the BPE-token model runs every layer once per token
    main = getattr(model, "main", None)
    total = 0.0
    counted = set()
    for stack in (m for m in model.modules() if isinstance(m, Stack)):
        share = rate if per_token or stack is main else 1.0
        rows = max(1.0, seq_len * share)
        context = min(stack.window, rows / 2) if stack.window else rows / 2
        width = stack.head_dim * stack.blocks[0].attn.n_heads
        weights = sum(p.numel() for p in stack.parameters())
        counted |= {id(p) for p in stack.parameters()}
        total += share * (6.0 * weights + 12.0 * context * width * len(stack.blocks))
    # embeddings, heads, policy
    others = sum(p.numel() for p in model.parameters() if id(p) not in counted)
    return total + (rate if per_token else 1.0) * 6.0 * others


def peak_flops(device: torch.device) -> float | None:
    """Dense bf16 peak FLOP/s of a GPU this table knows, else None (no utilisation is reported)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for part, peak in PEAK_BF16.items() if part in name), None)
