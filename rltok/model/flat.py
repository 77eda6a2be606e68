"""A flat byte transformer: no chunking, full causal attention at every byte (the reference at one end)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rltok.boundaries import NO_BOUNDARIES
from rltok.config import ModelConfig
from rltok.layers.blocks import Stack, rms_norm
from rltok.layers.loss import next_byte_nll
from rltok.model.unet import ModelOutput, init_weights


def matched_depth(cfg: ModelConfig) -> int:
    """Layers of main-network width whose parameters match the U-Net's (attention 4d^2, MLP 3*mult*d^2)."""
    byte_layer, main_layer = 4 + 3 * cfg.byte_mlp_mult, 4 + 3 * cfg.main_mlp_mult
    total = (cfg.n_encoder + cfg.n_decoder) * byte_layer + cfg.n_main * main_layer
    return max(1, round(total / main_layer))


class FlatByteTransformer(nn.Module):
    """Embed -> full-attention blocks -> head, over bytes."""

    tokenizer = None  # bytes are its symbols (see rltok.model.LanguageModel)
    config = None  # the run's Config, set by rltok.pretrained.build_model
    boundary_method = NO_BOUNDARIES  # it draws no chunks
    per_chunk = ()  # every layer runs per byte

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        n_layers = matched_depth(cfg)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = Stack(
            n_layers, cfg.d_model, cfg.n_heads, cfg.main_mlp_mult, None, cfg.rope_base
        )
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        init_weights(self, n_layers)

    def forward(
        self,
        ids: Tensor,
        boundaries: Tensor | None = None,
        noise: Tensor | None = None,
        targets: Tensor | None = None,
        valid: Tensor | None = None,
    ) -> ModelOutput:
        """ids (B, L) with BOS first; boundaries and noise are accepted and ignored (nothing is chunked);
        given `targets` (and `valid`), `nll` scores them."""
        positions = torch.arange(ids.size(1), device=ids.device).expand_as(ids)
        out = ModelOutput(self.head(rms_norm(self.blocks(self.embed(ids), positions))))
        if targets is not None:
            out.nll = next_byte_nll(out.logits, targets, valid)
        return out
