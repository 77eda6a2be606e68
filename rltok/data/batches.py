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

from rltok.data.gold import gold_codes
from rltok.errors import UserError
from rltok.runtime import seed_of
from rltok.text import BOS


@dataclass
class Packed:
    """Documents laid end to end: `data` (uint8, in memory or memory-mapped) and `ends`, the offset just
    past each document. The stream the model trains on reads them with BOS after each document.
    `gold`: each byte's gold code (rltok.data.gold), where the documents have gold word boundaries."""

    data: np.ndarray
    ends: np.ndarray
    gold: np.ndarray | None = None

    @classmethod
    def of(cls, docs: Sequence[bytes], gold: Sequence[bytes] | None = None) -> Packed:
        """The documents packed in memory (with their gold end masks, if given)."""
        return cls(
            np.frombuffer(b"".join(docs), dtype=np.uint8),
            np.cumsum([len(d) for d in docs], dtype=np.int64),
            None if gold is None else np.concatenate([gold_codes(g) for g in gold]),
        )

    @property
    def stream_length(self) -> int:
        """Bytes plus one BOS per document."""
        return len(self.data) + len(self.ends)

    def windows(self, starts: np.ndarray, length: int, gold: bool = False) -> np.ndarray:
        """(len(starts), length) int64 ids of the stream from each start (`gold`: their gold codes,
        0 at BOS); reads only those bytes."""
        at = starts[:, None] + np.arange(length)
        bos_at = self.ends + np.arange(len(self.ends))  # stream position of each document's BOS
        doc = np.searchsorted(bos_at, at)  # the document each position falls in (or ends at)
        # k BOS come before document k
        source = self.gold if gold else self.data
        data = source[np.minimum(at - doc, len(self.data) - 1)].astype(np.int64)
        return np.where(at == bos_at[doc], 0 if gold else BOS, data)


class TrainStream:
    """Random windows of the packed train split (in memory, or memory-mapped shards: a window never
    crosses two); its generator state is the data position."""

    def __init__(
        self,
        docs: Sequence[bytes],
        seq_len: int,
        batch_size: int,
        seed: int,
        gold: Sequence[bytes] | None = None,
    ):
        self.parts = docs.packed() if hasattr(docs, "packed") else [Packed.of(docs, gold)]
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

    def next_batch(self, gold: bool = False) -> tuple[Tensor, ...]:
        """inputs (B, L) = BOS + window[:-1] and targets (B, L) = window; with `gold`, also the gold
        code of each input byte (B, L), for a corpus that has gold word boundaries."""
        picks = torch.randint(
            0, int(self.windows_per_part.sum()), (self.batch_size,), generator=self.generator
        ).numpy()
        part = np.searchsorted(self.first_window, picks, side="right") - 1
        targets = np.empty((self.batch_size, self.seq_len), dtype=np.int64)
        codes = np.zeros_like(targets) if gold else None
        for k in np.unique(part):
            rows, starts = part == k, picks[part == k] - self.first_window[k]
            targets[rows] = self.parts[k].windows(starts, self.seq_len)
            if gold:
                if self.parts[k].gold is None:
                    raise UserError(
                        "--boundaries gold trains on the corpus's gold word boundaries, and this "
                        "corpus has none: prepare one with them (rltok data prepare chinese or "
                        "english-nospace) and pass it to --data"
                    )
                codes[rows] = self.parts[k].windows(starts, self.seq_len, gold=True)
        targets = torch.from_numpy(targets)
        bos = torch.full((self.batch_size, 1), BOS, dtype=torch.long)
        inputs = torch.cat([bos, targets[:, :-1]], dim=1)
        if not gold:
            return inputs, targets
        codes = torch.from_numpy(codes)
        return inputs, targets, torch.cat([torch.zeros_like(bos), codes[:, :-1]], dim=1)


@dataclass
class EvalBatch:
    """Consecutive windows of held-out documents, right-padded."""

    inputs: Tensor  # (B, L) BOS + piece[:-1]
    targets: Tensor  # (B, L) the piece
    valid: Tensor  # (B, L) bool: a real byte to predict
    doc_index: Tensor  # (B,) which document each row belongs to
    noise: Tensor  # (B, L) uniforms for boundary sampling, fixed per (document, window)
    gold: Tensor | None = (
        None  # (B, L) uint8 gold code of each input byte, where the corpus has one
    )


def eval_batches(
    docs: list[bytes],
    seq_len: int,
    batch_size: int,
    seed: int = 0,
    max_bytes: int | None = None,
    gold: list[bytes] | None = None,
) -> list[EvalBatch]:
    """Every byte of every document predicted once; `max_bytes` scores only the first part of each
    document, every document in proportion to its length, so a quick score still spans the split.
    `gold`: the documents' end masks, whose codes the batches then carry."""
    total = sum(map(len, docs))
    share = 1.0 if max_bytes is None or max_bytes >= total else max_bytes / total
    rows = []
    for d, data in enumerate(docs):
        # sampling noise keyed by content, so a document scores the same alone or in any batch
        key = zlib.crc32(data)
        kept = data[: math.ceil(len(data) * share)]
        codes = None if gold is None else gold_codes(gold[d])[: len(kept)]
        for w, start in enumerate(range(0, len(kept), seq_len)):
            piece_codes = None if codes is None else codes[start : start + seq_len]
            rows.append((d, key, w, kept[start : start + seq_len], piece_codes))
    batches = []
    for i in range(0, len(rows), batch_size):
        group = rows[i : i + batch_size]
        B = len(group)
        targets = torch.zeros(B, seq_len, dtype=torch.long)
        valid = torch.zeros(B, seq_len, dtype=torch.bool)
        noise = torch.empty(B, seq_len)
        codes = None if gold is None else torch.zeros(B, seq_len, dtype=torch.uint8)
        for r, (_, key, w, piece, piece_codes) in enumerate(group):
            targets[r, : len(piece)] = torch.tensor(list(piece), dtype=torch.long)
            if codes is not None:  # each input byte's code: the piece's, one position later
                codes[r, 1 : len(piece)] = torch.from_numpy(piece_codes[:-1].copy())
            valid[r, : len(piece)] = True
            generator = torch.Generator().manual_seed(seed_of(seed, key, w))
            noise[r] = torch.rand(seq_len, generator=generator)
        inputs = torch.cat([torch.full((B, 1), BOS, dtype=torch.long), targets[:, :-1]], dim=1)
        docs_of_rows = torch.tensor([d for d, *_ in group])
        batches.append(EvalBatch(inputs, targets, valid, docs_of_rows, noise, codes))
    return batches
