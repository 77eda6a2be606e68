"""Incremental decoding: each model advanced one symbol at a time for a batch of rows in lockstep,
with a key/value cache per attention layer, so a step costs the same however long the text is.

For the U-Net, a step runs the new byte through the encoder (its cache bounded by the attention
window), lets the boundary method decide online, and, in the rows where a chunk closes, runs the
chunk's vector through the main network once (its cache holds the chunks of the last `context`
bytes: a sliding context). The decoder then reads the byte with the newest chunk output, exactly as
the full forward pass distributes it, so the logits equal the forward's for the same bytes and noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rltok.layers.blocks import rms_norm
from rltok.layers.chunking import PoolState, pool_step, smooth_step
from rltok.model.bpe_lm import BPETokenTransformer
from rltok.model.flat import FlatByteTransformer
from rltok.model.unet import ByteUNet


@dataclass
class Step:
    """What one step produces for every row."""

    logits: Tensor  # (B, V) next-symbol logits
    boundaries: Tensor | None = None  # (B,) bool: a chunk ends at the symbol just read
    probs: Tensor | None = None  # (B,) its probability, where the boundary method has one


class UNetDecoder:
    """A ByteUNet's caches and chunk state for `batch` rows."""

    def __init__(self, model: ByteUNet, batch: int, context: int):
        weight = model.head.weight
        device, dtype = weight.device, weight.dtype
        self.model, self.t = model, 0
        self.encoder = model.encoder.cache(batch, None, device, dtype)
        self.main = model.main.cache(batch, context, device, dtype)
        self.decoder = model.decoder.cache(batch, None, device, dtype)
        self.boundary_state = model.boundary.online_state()
        self.chunk_output = torch.zeros(batch, model.cfg.d_model, device=device, dtype=dtype)
        self.pool = PoolState.empty(batch, model.cfg.d_model, device)

    @torch.no_grad()  # inference only: a graph kept across steps would grow with every byte
    def step(self, ids: Tensor, noise: Tensor) -> Step:
        """Read byte ids (B,) at the next position with boundary uniforms `noise` (B,)."""
        m = self.model
        positions = torch.full_like(ids, self.t)
        x = m.encoder.step(m.embed(ids), positions, self.encoder)
        decision = m.boundary.online(
            self.boundary_state, x, ids, m.early_head(rms_norm(x)), noise, self.t
        )
        ends = decision.boundaries
        # gate and confidence are 1 in value (straight-through): only their gradient, unused here, differs
        chunks = pool_step(x, self.pool, decision.pooling)
        closing = ends.nonzero()[:, 0]
        if len(closing):
            closed = chunks[closing]
            y = m.up(m.main.step(closed, positions[closing], self.main, closing) - closed)
            if decision.smoothing is not None:  # H-Net: the new output blends into the previous one
                y = smooth_step(y, self.chunk_output[closing], decision.smoothing[closing])
            self.chunk_output[closing] = y
            self.pool.close(closing)
        h = m.decoder.step(x + self.chunk_output, positions, self.decoder)
        self.t += 1
        return Step(m.head(rms_norm(h)), ends, decision.probs)

    def nbytes(self) -> dict[str, int]:
        """Cache memory per stage."""
        return {
            "encoder": self.encoder.nbytes(),
            "main": self.main.nbytes(),
            "decoder": self.decoder.nbytes(),
        }


class FlatDecoder:
    """A flat transformer's caches (bytes for the flat model, BPE tokens for the BPE-token model)."""

    def __init__(self, model: FlatByteTransformer | BPETokenTransformer, batch: int, context: int):
        weight = model.embed.weight
        self.model, self.t = model, 0
        self.cache = model.blocks.cache(batch, context, weight.device, weight.dtype)

    @torch.no_grad()
    def step(self, ids: Tensor, noise: Tensor | None = None) -> Step:
        """Read symbol ids (B,) at the next position."""
        m = self.model
        h = rms_norm(m.blocks.step(m.embed(ids), torch.full_like(ids, self.t), self.cache))
        self.t += 1
        # bpe-lm ties them
        head = m.head.weight if isinstance(m, FlatByteTransformer) else m.embed.weight
        return Step(h @ head.to(h.dtype).T)

    def nbytes(self) -> dict[str, int]:
        """Cache memory."""
        return {"blocks": self.cache.nbytes()}


def decoder_for(model: nn.Module, batch: int, context: int) -> UNetDecoder | FlatDecoder:
    """The incremental decoder of any rltok model."""
    if isinstance(model, ByteUNet):
        return UNetDecoder(model, batch, context)
    return FlatDecoder(model, batch, context)
