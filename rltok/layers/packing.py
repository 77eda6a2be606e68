"""Rows of a right-padded (B, T) layout packed into (N,) and back, so that a network over a varying
number of chunks per sequence does almost no work on padding; every index is computed on the device,
and the only host sync is the one that learns N.

The packed rows are padded to a bucket a little above N, so that shapes repeat from step to step: on
the CPU a bf16 matrix product builds (and keeps) a kernel for every new shape, which costs a run whose
chunk count changes every step about a sixth of its main network's time and 0.8 GB of memory
(benchmarks/packed_shapes.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor


def bucket(n: int, multiple: int, per_octave: int) -> int:
    """n rounded up to a multiple of `multiple` and of 1/per_octave of n's octave: a count that varies
    meets few distinct sizes, and at most about 1/per_octave of the rows are padding."""
    step = max(multiple, 2 ** max(0, n.bit_length() - 1) // per_octave)
    return -(-n // step) * step


@dataclass
class Packing:
    """Where the valid rows of a right-padded layout sit once packed, in order."""

    valid: Tensor  # (B, T) bool, each row's valid positions first
    index: Tensor  # (N,) the flat position b * T + t of each valid row
    lengths: Tensor  # (B,) valid rows per sequence, on the device
    sizes: list[int]  # the same on the host
    longest: int  # the most rows a sequence could hold, known without looking at the data
    rows: int  # the packed rows: the N valid ones, then zeros up to a bucket
    # the attention mask over the packed rows on the FlexAttention path, made once per packing
    block_mask: object = field(default=None, repr=False)

    @classmethod
    def of(cls, valid: Tensor, sizes: list[int] | None = None, longest: int = 0) -> Packing:
        """The packing of `valid`, whose valid rows per sequence `sizes` save the host sync where the
        caller has read them already; `longest` bounds a sequence's rows (default: valid's width)."""
        lengths = valid.sum(dim=1)
        sizes = lengths.tolist() if sizes is None else sizes
        N = sum(sizes)
        index = torch.nonzero_static(valid.flatten(), size=N)[:, 0]
        return cls(valid, index, lengths, sizes, longest or valid.size(1), bucket(N, 16, 16))

    def pack(self, x: Tensor) -> Tensor:
        """(B, T, C) -> the valid rows, then zero rows up to the bucket: (rows, C)."""
        valid = x.flatten(0, 1).index_select(0, self.index)
        return F.pad(valid, (0, 0, 0, self.rows - len(self.index)))

    def unpack(self, rows: Tensor) -> Tensor:
        """Packed rows (rows, C) back into the right-padded layout (B, T, C), zeros in the padding."""
        B, T = self.valid.shape
        valid = rows[: len(self.index)]
        padded = rows.new_zeros(B * T, rows.size(-1)).index_copy(0, self.index, valid)
        return padded.view(B, T, -1)
