"""The autoregressive byte U-Net (docs/architecture.md).

    bytes -> embed -> encoder (sliding window) --------------------------------+ residual x
                         |-> early-exit head                                    |
                         |-> boundary method -> a_t                             |
                         '-> select chunk ends -> main network (full attn) -> distribute -+-> decoder -> head

Byte t is predicted from x_t plus what the main network added to the last chunk ending at or before t,
so the prediction of byte t+1 depends only on bytes <= t and boundary decisions <= t.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rltok.boundaries import BoundaryMethod, Decision
from rltok.config import ModelConfig
from rltok.layers.blocks import Stack, rms_norm
from rltok.layers.chunking import chunk_layout, distribute, ema_over_chunks, pool, select
from rltok.layers.loss import next_byte_nll


@dataclass
class ModelOutput:
    """What one forward pass produces."""

    logits: Tensor | None  # (B, L, V) next-byte logits of the full model
    early_logits: Tensor | None = None  # (B, L, V) next-byte logits from the encoder alone
    boundaries: Tensor | None = None  # (B, L) int64 chunk ends
    decision: Decision | None = None
    nll: Tensor | None = None  # (B, L) next-byte loss in nats, fp32, when targets were given
    rollouts: Tensor | None = None  # (R,) the row of the text each extra segmentation is of
    rollout_logits: Tensor | None = (
        None  # (R, L, V) logits of the extra segmentations, without gradient
    )


def init_weights(model: nn.Module, n_layers: int) -> None:
    """GPT-2 style: N(0, 0.02), residual output projections scaled down by depth."""
    for name, p in model.named_parameters():
        if p.dim() < 2 or "boundary" in name:
            continue
        std = (
            0.02 / (2 * n_layers) ** 0.5 if name.endswith(("proj.weight", "down.weight")) else 0.02
        )
        nn.init.normal_(p, std=std)


class ByteUNet(nn.Module):
    """Encoder over bytes, main network over chunks, decoder over bytes."""

    tokenizer = None  # bytes are its symbols; its chunks are drawn by the boundary method
    config = None  # the run's Config, set by rltok.pretrained.build_model

    def __init__(self, cfg: ModelConfig, boundary: BoundaryMethod):
        super().__init__()
        self.cfg = cfg
        d, h = cfg.d_model, cfg.n_heads
        self.embed = nn.Embedding(cfg.vocab_size, d)
        self.encoder = Stack(
            cfg.n_encoder, d, h, cfg.byte_mlp_mult, cfg.attention_window, cfg.rope_base
        )
        self.early_head = nn.Linear(d, cfg.vocab_size, bias=False)
        self.boundary = boundary
        self.main = Stack(cfg.n_main, d, h, cfg.main_mlp_mult, None, cfg.rope_base)
        self.up = nn.Linear(d, d, bias=False)
        self.decoder = Stack(
            cfg.n_decoder, d, h, cfg.byte_mlp_mult, cfg.attention_window, cfg.rope_base
        )
        self.head = nn.Linear(d, cfg.vocab_size, bias=False)
        init_weights(self, cfg.n_encoder + cfg.n_main + cfg.n_decoder)

    @property
    def boundary_method(self) -> BoundaryMethod:
        """The method that draws its chunks (rltok.model.LanguageModel)."""
        return self.boundary

    @property
    def per_chunk(self) -> tuple[nn.Module, ...]:
        """The parts that run once per chunk: the main network and the projection of its output."""
        return (self.main, self.up)

    def forward(
        self,
        ids: Tensor,
        boundaries: Tensor | None = None,
        noise: Tensor | None = None,
        rollouts: Tensor | None = None,
        learn_rollouts: bool = False,
        targets: Tensor | None = None,
        valid: Tensor | None = None,
    ) -> ModelOutput:
        """ids (B, L) with BOS first; `boundaries` forces a segmentation, `noise` fixes the sampling;
        given `targets` (B, L) (and `valid`, where a byte is to be predicted), `nll` scores them.
        `rollouts` (R,) names rows of `ids` to segment once more each (the group estimator): the
        encoder runs once per text, and the main network and decoder run on the extra segmentations,
        without gradient unless `learn_rollouts` (they score rewards; with it the language model also
        learns from them). The decision then covers B + R rows."""
        B, L = ids.shape
        positions = torch.arange(L, device=ids.device).expand(B, L)
        x = self.encoder(self.embed(ids), positions)
        early_logits = self.early_head(rms_norm(x))

        decided = (x, ids, early_logits)
        if rollouts is not None:  # the batch's rows, then each rollout's text once more
            rollouts = rollouts.to(ids.device)
            rows = torch.cat([torch.arange(B, device=ids.device), rollouts])
            # index_select, not t[rows]: the backward of indexing with repeated rows sums in a
            # thread-dependent order on CPU, which would break bit-identical resumes
            decided = tuple(t.index_select(0, rows) for t in decided)
        decision = self.boundary(*decided, noise=noise, forced=boundaries)
        logits = self._predict(x, decision.rows(slice(0, B)))
        out = ModelOutput(logits, early_logits, decision.boundaries[:B], decision)
        if targets is not None:
            out.nll = next_byte_nll(logits, targets, valid)
        if rollouts is not None:
            out.rollouts = rollouts
            with torch.set_grad_enabled(learn_rollouts and torch.is_grad_enabled()):
                out.rollout_logits = self._predict(
                    x.index_select(0, rollouts), decision.rows(slice(B, None))
                )
        return out

    def _predict(self, x: Tensor, decision: Decision) -> Tensor:
        """Next-byte logits from encoder states x and a segmentation: down, main network, up, decoder."""
        positions = torch.arange(x.size(1), device=x.device).expand(x.shape[:2])
        ends, packing = chunk_layout(decision.boundaries)
        chunks = pool(x, ends, decision.pooling)
        if decision.gate is not None:  # Nawrot: the straight-through path to the boundary predictor
            chunks = chunks * select(decision.gate[..., None], ends)
        # rotary positions of the main network are the byte positions of the chunk ends; chunk rows
        # are packed so that the varying number of chunks per sequence costs no padded MLP work.
        # The decoder reads what the main network adds to its chunks (the bytes' own part reaches it
        # through x): a norm of the whole residual stream would bury that under the chunk vector.
        y = packing.unpack(self.up(self.main(chunks, ends, packing) - packing.pack(chunks)))
        if decision.smoothing is not None:  # H-Net: each chunk output blends into the one before
            y = ema_over_chunks(y, select(decision.smoothing[..., None], ends)[..., 0])
        up = distribute(y, decision.boundaries)
        if decision.confidence is not None:
            up = up * decision.confidence[..., None].to(up.dtype)
        return self.head(rms_norm(self.decoder(x + up, positions)))
