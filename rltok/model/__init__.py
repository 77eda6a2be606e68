"""Model builders: the byte U-Net with a pluggable boundary method, or a reference (flat bytes, BPE tokens)."""

from __future__ import annotations

from torch import nn

from rltok import boundaries
from rltok.config import Config
from rltok.model.bpe_lm import BPETokenTransformer
from rltok.model.flat import FlatByteTransformer
from rltok.model.unet import ByteUNet, ModelOutput

REFERENCE_MODELS = ("flat", "bpe-lm")
BPE_METHODS = (
    "bpe",
    "bpe-lm",
)  # these read a BPE that the trainer fits on the training split first


def build_model(cfg: Config) -> nn.Module:
    """The network a config describes (weights freshly initialised)."""
    if cfg.boundaries.method == "flat":
        return FlatByteTransformer(cfg.model)
    if cfg.boundaries.method == "bpe-lm":
        return BPETokenTransformer(cfg.model, cfg.boundaries.bpe_vocab)
    return ByteUNet(cfg.model, boundaries.make(cfg.model.d_model, cfg.boundaries))


__all__ = [
    "BPE_METHODS",
    "BPETokenTransformer",
    "ByteUNet",
    "FlatByteTransformer",
    "ModelOutput",
    "build_model",
    "REFERENCE_MODELS",
]
