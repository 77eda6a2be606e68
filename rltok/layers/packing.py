"""Rows of a right-padded (B, T) layout packed into (N,) and back, so that a network over a varying
number of chunks per sequence does no work on padding; every index is computed on the device, and
the only host sync is the one that learns N."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class Packing:
    """Where the valid rows of a right-padded layout sit once packed, in order."""

    valid: Tensor  # (B, T) bool, each row's valid positions first
    index: Tensor  # (N,) the flat position b * T + t of each valid row
    lengths: Tensor  # (B,) valid rows per sequence, on the device
    sizes: list[int]  # the same on the host
    longest: int  # the most rows a sequence could hold, known without looking at the data
    # the attention mask over the packed rows on the FlexAttention path, made once per packing
    block_mask: object = field(default=None, repr=False)

    @classmethod
    def of(cls, valid: Tensor, sizes: list[int] | None = None, longest: int = 0) -> Packing:
        """The packing of `valid`, whose valid rows per sequence `sizes` save the host sync where the
        caller has read them already; `longest` bounds a sequence's rows (default: valid's width)."""
        lengths = valid.sum(dim=1)
        sizes = lengths.tolist() if sizes is None else sizes
        index = torch.nonzero_static(valid.flatten(), size=sum(sizes))[:, 0]
        return cls(valid, index, lengths, sizes, longest or valid.size(1))

    def pack(self, x: Tensor) -> Tensor:
        """(B, T, ...) -> the valid rows (N, ...)."""
        return x.flatten(0, 1).index_select(0, self.index)

    def unpack(self, rows: Tensor) -> Tensor:
        """Packed rows (N, C) back into the right-padded layout (B, T, C), zeros in the padding."""
        B, T = self.valid.shape
        padded = rows.new_zeros(B * T, rows.size(-1)).index_copy(0, self.index, rows)
        return padded.view(B, T, -1)
