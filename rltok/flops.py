"""Analytic training FLOPs per byte for every model, and model-FLOPs utilisation on known GPUs."""

from __future__ import annotations

import torch
from torch import nn

from rltok.layers.blocks import Stack

# dense bf16 peak FLOP/s of one device, by a part of its name
# matched by the first name that occurs in the device's name, so the variants come before "H100"
PEAK_BF16 = {
    "H200": 989e12,
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
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
    per byte, as a weight, and the projection of the main network's output once per chunk."""
    rate = rate or 0.0
    per_token = model.tokenizer is not None  # the BPE-token model runs every layer once per token
    # the U-Net's main network and the projection of its output (rltok.model.LanguageModel)
    chunk_stacks = {id(m) for m in model.per_chunk if isinstance(m, Stack)}
    chunked = {id(p) for m in model.per_chunk if not isinstance(m, Stack) for p in m.parameters()}
    total = 0.0
    counted = set()
    for stack in (m for m in model.modules() if isinstance(m, Stack)):
        share = rate if per_token or id(stack) in chunk_stacks else 1.0
        rows = max(1.0, seq_len * share)
        context = min(stack.window, rows / 2) if stack.window else rows / 2
        width = stack.head_dim * stack.blocks[0].attn.n_heads
        weights = sum(p.numel() for p in stack.parameters())
        counted |= {id(p) for p in stack.parameters()}
        total += share * (6.0 * weights + 12.0 * context * width * len(stack.blocks))
    # embeddings, heads, policy per byte (per token for the BPE-token model); the projection per chunk
    others = [p for p in model.parameters() if id(p) not in counted]
    per_byte = sum(p.numel() for p in others if id(p) not in chunked)
    per_chunk = sum(p.numel() for p in others if id(p) in chunked)
    return total + 6.0 * ((rate if per_token else 1.0) * per_byte + rate * per_chunk)


def peak_flops(device: torch.device) -> float | None:
    """Dense bf16 peak FLOP/s of a GPU this table knows, else None (no utilisation is reported)."""
    if device.type != "cuda":
        return None
    return peak_of(torch.cuda.get_device_name(device))


def peak_of(device_name: str) -> float | None:
    """The dense bf16 peak FLOP/s of the first table entry whose name occurs in `device_name`."""
    return next((peak for part, peak in PEAK_BF16.items() if part in device_name), None)
