"""The networks: the byte U-Net with a pluggable boundary method, and the two references (flat bytes,
BPE tokens). A leaf of the package: these files import torch, the config and the layers they use;
generation and the Hub layout are added on top of them in rltok.pretrained."""

from __future__ import annotations

from typing import Protocol

from torch import Tensor, nn

from rltok.boundaries import BoundaryMethod
from rltok.bpe import StoredBPE
from rltok.config import Config
from rltok.model.bpe_lm import BPETokenTransformer
from rltok.model.flat import FlatByteTransformer
from rltok.model.unet import ByteUNet, ModelOutput

REFERENCE_MODELS = ("flat", "bpe-lm")


class LanguageModel(Protocol):
    """What every network answers, so that training, evaluation and generation never ask which one
    they hold: a forward pass that scores given targets; the tokenizer whose tokens are its chunks
    (the BPE-token model's; None where chunks are drawn by a boundary method, or not at all); and the
    boundary method that draws them (the reference models' draws none, and its hooks do nothing:
    the trainer calls every hook of every model alike); the parts that run once per chunk; and the
    run's config (None for a network built by hand rather than by rltok.pretrained.build_model)."""

    tokenizer: StoredBPE | None
    config: Config | None
    boundary_method: BoundaryMethod
    per_chunk: tuple[nn.Module, ...]  # the parts that run once per chunk (FLOPs per byte)

    def __call__(
        self, ids: Tensor, *, targets: Tensor | None = None, valid: Tensor | None = None, **kw
    ) -> ModelOutput:
        """Logits where the model has them, and `nll` (B, L) in nats when `targets` are given."""
        ...


__all__ = [
    "LanguageModel",
    "BPETokenTransformer",
    "ByteUNet",
    "FlatByteTransformer",
    "ModelOutput",
    "REFERENCE_MODELS",
]
