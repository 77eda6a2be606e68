"""Bytes in: files, folders and JSONL become documents (documents.py), documents become splits
(splits.py), splits become batches (batches.py). Benchmark corpora are prepared from registry packages
(corpora.py), and corpora larger than memory are read from memory-mapped shards (shards.py)."""

from __future__ import annotations

from pathlib import Path

from rltok.data.batches import EvalBatch, Packed, TrainStream, eval_batches
from rltok.data.corpora import load_prepared, prepared_folder
from rltok.data.documents import iter_documents, read_documents
from rltok.data.shards import is_sharded, load_sharded
from rltok.data.splits import (
    HOLDOUT_EVERY,
    SPLITS,
    Corpus,
    embedded_corpus,
    holdout_split,
    split_bytes,
    split_documents,
    split_hashes,
)


def load_corpus(path: str | Path | None) -> Corpus:
    """The embedded corpus when path is None, a sharded corpus (memory-mapped) or a prepared one (its
    folder, or `english`/`code`) as it was split, else the documents at path, split."""
    if path is None:
        return embedded_corpus()
    if is_sharded(path):
        return load_sharded(path)

    folder = prepared_folder(path)
    if folder is not None:
        return load_prepared(folder)
    return split_documents(Path(path).name, read_documents(path))


__all__ = [
    "HOLDOUT_EVERY",
    "SPLITS",
    "Corpus",
    "EvalBatch",
    "Packed",
    "TrainStream",
    "embedded_corpus",
    "eval_batches",
    "holdout_split",
    "iter_documents",
    "load_corpus",
    "read_documents",
    "split_bytes",
    "split_documents",
    "split_hashes",
]
