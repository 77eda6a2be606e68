"""Model builders: the byte U-Net with a pluggable boundary method, or the flat byte reference."""

from __future__ import annotations

from torch import nn

from rltok import boundaries
from rltok.config import Config
from rltok.model.flat import FlatByteTransformer
from rltok.model.unet import ByteUNet, ModelOutput

REFERENCE_MODELS = ("flat",)


def build_model(cfg: Config) -> nn.Module:
    """The network a config describes (weights freshly initialised)."""
    if cfg.boundaries.method == "flat":
        return FlatByteTransformer(cfg.model)
    return ByteUNet(cfg.model, boundaries.make(cfg.model.d_model, cfg.boundaries))


__all__ = ["ByteUNet", "FlatByteTransformer", "ModelOutput", "build_model", "REFERENCE_MODELS"]
