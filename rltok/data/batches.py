"""Splits become batches. Every sequence starts with BOS. Training packs the train split into one
stream (BOS between documents) and cuts random windows; evaluation cuts each held-out document into
consecutive windows, so every byte is predicted exactly once."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from rltok.errors import UserError
from rltok.runtime import seed_of
from rltok.text import BOS


@dataclass
class Packed:
    """Documents laid end to end: `data` (uint8, in memory or memory-mapped) and `ends`, the offset just
    past each document. The stream the model trains on reads them with BOS after each document."""

    data: np.ndarray
    ends: np.ndarray

    @classmethod
    def of(cls, docs: Sequence[bytes]) -> Packed:
        """The documents packed in memory."""
        return cls(
            np.frombuffer(b"".join(docs), dtype=np.uint8),
            np.cumsum([len(d) for d in docs], dtype=np.int64),
        )

    @property
    def stream_length(self) -> int:
        """Bytes plus one BOS per document."""
        return len(self.data) + len(self.ends)

    def windows(self, starts: np.ndarray, length: int) -> np.ndarray:
        """(len(starts), length) int64 ids of the stream from each start; reads only those bytes."""
        at = starts[:, None] + np.arange(length)
        bos_at = self.ends + np.arange(len(self.ends))  # stream position of each document's BOS
        doc = np.searchsorted(bos_at, at)  # the document each position falls in (or ends at)
        # k BOS come before document k
        data = self.data[np.minimum(at - doc, len(self.data) - 1)].astype(np.int64)
        return np.where(at == bos_at[doc], BOS, data)


class TrainStream:
    """Random windows of the packed train split (in memory, or memory-mapped shards: a window never
    crosses two); its generator state is the data position."""

    def __init__(self, docs: Sequence[bytes], seq_len: int, batch_size: int, seed: int):
        self.parts = docs.packed() if hasattr(docs, "packed") else [Packed.of(docs)]
        self.windows_per_part = np.array(
            [max(0, p.stream_length - seq_len + 1) for p in self.parts]
        )
        if self.windows_per_part.sum() == 0:
            raise UserError(
                f"the training split holds {sum(p.stream_length for p in self.parts)} bytes, fewer "
                f"than one sequence of {seq_len}; add text or lower the sequence length"
            )
        self.first_window = np.cumsum(self.windows_per_part) - self.windows_per_part
        self.seq_len, self.batch_size = seq_len, batch_size
        self.generator = torch.Generator().manual_seed(seed)

    def next_batch(self) -> tuple[Tensor, Tensor]:
        """inputs (B, L) = BOS + window[:-1] and targets (B, L) = window."""
        picks = torch.randint(
            0, int(self.windows_per_part.sum()), (self.batch_size,), generator=self.generator
        ).numpy()
        part = np.searchsorted(self.first_window, picks, side="right") - 1
        targets = np.empty((self.batch_size, self.seq_len), dtype=np.int64)
        for k in np.unique(part):
            rows = part == k
            targets[rows] = self.parts[k].windows(picks[rows] - self.first_window[k], self.seq_len)
        targets = torch.from_numpy(targets)
        bos = torch.full((self.batch_size, 1), BOS, dtype=torch.long)
        return torch.cat([bos, targets[:, :-1]], dim=1), targets


@dataclass
class EvalBatch:
    """Consecutive windows of held-out documents, right-padded."""

    inputs: Tensor  # (B, L) BOS + piece[:-1]
    targets: Tensor  # (B, L) the piece
    valid: Tensor  # (B, L) bool: a real byte to predict
    doc_index: Tensor  # (B,) which document each row belongs to
    noise: Tensor  # (B, L) uniforms for boundary sampling, fixed per (document, window)


def eval_batches(
    docs: list[bytes], seq_len: int, batch_size: int, seed: int = 0, max_bytes: int | None = None
) -> list[EvalBatch]:
    """Every byte of every document predicted once; `max_bytes` scores only the first part of each
    document, every document in proportion to its length, so a quick score still spans the split."""
    total = sum(map(len, docs))
    share = 1.0 if max_bytes is None or max_bytes >= total else max_bytes / total
    rows = []
    for d, data in enumerate(docs):
        # sampling noise keyed by content, so a document scores the same alone or in any batch
        key = zlib.crc32(data)
        kept = data[: math.ceil(len(data) * share)]
        for w, start in enumerate(range(0, len(kept), seq_len)):
            rows.append((d, key, w, kept[start : start + seq_len]))
    batches = []
    for i in range(0, len(rows), batch_size):
        group = rows[i : i + batch_size]
        B = len(group)
        targets = torch.zeros(B, seq_len, dtype=torch.long)
        valid = torch.zeros(B, seq_len, dtype=torch.bool)
        noise = torch.empty(B, seq_len)
        for r, (_, key, w, piece) in enumerate(group):
            targets[r, : len(piece)] = torch.tensor(list(piece), dtype=torch.long)
            valid[r, : len(piece)] = True
            generator = torch.Generator().manual_seed(seed_of(seed, key, w))
            noise[r] = torch.rand(seq_len, generator=generator)
        inputs = torch.cat([torch.full((B, 1), BOS, dtype=torch.long), targets[:, :-1]], dim=1)
        docs_of_rows = torch.tensor([d for d, _, _, _ in group])
        batches.append(EvalBatch(inputs, targets, valid, docs_of_rows, noise))
    return batches
