"""A transformer over BPE token ids: the reference at the other end from the flat byte model.

It reads the same byte windows as every other model and is scored in the same unit: each window's
bytes are BPE-encoded, the model predicts token after token, and each token's negative log-likelihood
is charged to the token's last byte, so the sum over a window's bytes is the window's total bits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rltok.boundaries import NO_BOUNDARIES
from rltok.bpe import StoredBPE
from rltok.config import ModelConfig
from rltok.layers.blocks import Stack, rms_norm
from rltok.layers.packing import Packing
from rltok.model.flat import matched_depth
from rltok.model.unet import ModelOutput, init_weights
from rltok.text import BOS


class BPETokenTransformer(nn.Module):
    """Token embedding (tied to the output head) -> full-attention blocks, as deep as the flat model;
    its chunks are the tokens of its `tokenizer`, read from the bytes it is given to score."""

    boundary_method = NO_BOUNDARIES  # its tokenizer, not a boundary method, draws its chunks
    per_chunk = ()  # every layer runs per token: its tokenizer says so
    config = None  # the run's Config, set by rltok.pretrained.build_model

    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        self.tokenizer = StoredBPE()
        self.bos = vocab_size  # document separator and start token, after the BPE's own ids
        n_layers = matched_depth(cfg)
        self.embed = nn.Embedding(vocab_size + 1, cfg.d_model)
        self.blocks = Stack(
            n_layers, cfg.d_model, cfg.n_heads, cfg.main_mlp_mult, None, cfg.rope_base
        )
        init_weights(self, n_layers)

    def tokenize(
        self, targets: Tensor, valid: Tensor, starts: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Token ids (B, T) of each row's bytes to predict, right-padded, the position of each token's
        last byte (B, T), and which tokens are real (B, T); `starts` (B,) begins a fresh piece of BPE
        in each row there (a continuation tokenized apart from its context)."""
        bpe = self.tokenizer.get()
        rows = []
        fresh = starts.tolist() if starts is not None else [0] * len(targets)
        for row, n, begin in zip(targets.tolist(), valid.sum(dim=1).tolist(), fresh):
            ids, ends, start = [], [], 0
            bos_at = {
                i for i, b in enumerate(row[:n]) if b >= BOS
            }  # BOS bytes are tokens of their own
            for cut in sorted(bos_at | ({begin} if 0 < begin < n else set())) + [n]:
                piece_ids, piece_ends = bpe.encode(bytes(row[start:cut]))
                ids += piece_ids
                ends += [start + e - 1 for e in piece_ends]
                if cut in bos_at:
                    ids.append(self.bos)
                    ends.append(cut)
                start = cut + 1 if cut in bos_at else cut
            rows.append((ids, ends))
        T = max(1, max(len(ids) for ids, _ in rows))
        tokens = torch.zeros(len(rows), T, dtype=torch.long)
        last_byte = torch.zeros(len(rows), T, dtype=torch.long)
        real = torch.zeros(len(rows), T, dtype=torch.bool)
        for r, (ids, ends) in enumerate(rows):
            tokens[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            last_byte[r, : len(ends)] = torch.tensor(ends, dtype=torch.long)
            real[r, : len(ids)] = True
        return tokens.to(targets.device), last_byte.to(targets.device), real.to(targets.device)

    def forward(
        self,
        ids: Tensor,
        boundaries: Tensor | None = None,
        noise: Tensor | None = None,
        targets: Tensor | None = None,
        valid: Tensor | None = None,
        starts: Tensor | None = None,
    ) -> ModelOutput:
        """Per-byte negative log-likelihood (nats) of `targets` (B, L) where `valid`; `ids` (the bytes
        before them) carry no information the targets lack, and boundaries and noise are ignored;
        `starts` (B,) tokenizes each row's bytes from there on apart from those before."""
        if targets is None:
            raise ValueError(
                "the BPE-token model scores given targets: call it as model(ids, targets=..., valid=...)"
            )
        valid = torch.ones_like(targets, dtype=torch.bool) if valid is None else valid
        tokens, last_byte, real = self.tokenize(targets, valid, starts)
        inputs = torch.cat([torch.full_like(tokens[:, :1], self.bos), tokens[:, :-1]], dim=1)
        positions = torch.arange(tokens.size(1), device=tokens.device).expand_as(tokens)
        packing = Packing.of(real)
        h = rms_norm(packing.unpack(self.blocks(self.embed(inputs), positions, packing)))
        logits = h @ self.embed.weight.to(h.dtype).T
        token_nll = F.cross_entropy(
            logits.float().flatten(0, 1), tokens.flatten(), reduction="none"
        )
        nll = torch.zeros(targets.shape, dtype=torch.float32, device=targets.device)
        nll.scatter_add_(1, last_byte, token_nll.view_as(tokens) * real)
        # chunk ends in input coordinates (input t + 1 is target t), so rate and whitespace statistics
        # count tokens the way they count the U-Net's chunks
        ends = torch.zeros(
            targets.size(0), targets.size(1) + 1, dtype=torch.long, device=targets.device
        )
        ends.scatter_(1, (last_byte + 1) * real, 1)
        ends[:, 0] = 1
        return ModelOutput(logits=None, boundaries=ends[:, :-1], nll=nll * valid)
