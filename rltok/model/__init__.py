"""The networks: the byte U-Net with a pluggable boundary method, and the two references (flat bytes,
BPE tokens). A leaf of the package: these files import torch, the config and the layers they use;
generation and the Hub layout are added on top of them in rltok.pretrained."""

from __future__ import annotations

from rltok.model.bpe_lm import BPETokenTransformer
from rltok.model.flat import FlatByteTransformer
from rltok.model.unet import ByteUNet, ModelOutput

REFERENCE_MODELS = ("flat", "bpe-lm")
BPE_METHODS = (
    "bpe",
    "bpe-lm",
)  # these read a BPE that the trainer fits on the training split first

__all__ = [
    "BPE_METHODS",
    "BPETokenTransformer",
    "ByteUNet",
    "FlatByteTransformer",
    "ModelOutput",
    "REFERENCE_MODELS",
]
