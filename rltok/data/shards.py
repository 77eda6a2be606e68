"""Corpora larger than memory: `rltok data shard SOURCE OUT` streams documents (local files or a Hugging
Face dataset) into uint8 shard files with a document index, and `--data OUT` trains on them through
memory maps, with constant memory whatever the corpus size.

    OUT/shards.json                   the source, the split rule, and per shard: documents, bytes, sha256
    OUT/{train,val,test}/NNNNN.bin    documents end to end, raw bytes
    OUT/{train,val,test}/NNNNN.idx    int64 offsets: 0, then the end of each document

Documents are split as everywhere in rltok: of every 20, the 19th goes to validation and the 20th to test.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rltok.data.batches import Packed
from rltok.data.documents import iter_documents
from rltok.data.splits import HOLDOUT_EVERY, SPLITS, Corpus, holdout_split
from rltok.errors import UserError

MANIFEST = "shards.json"


@dataclass(frozen=True)
class HubSource:
    """A Hugging Face dataset streamed with the paper's filters."""

    path: str
    config: str | None
    field: str
    min_bytes: int = 0  # shorter documents are dropped
    keep_bytes: int | None = None  # longer ones are cut to this many bytes


# the paper's corpora: FineWeb documents of at least 4096 bytes cut to their first 4095, and CodeParrot
# Python files of at least 4096 bytes
HUB_SOURCES = {
    "fineweb": HubSource(
        "HuggingFaceFW/fineweb", "sample-100BT", "text", min_bytes=4096, keep_bytes=4095
    ),
    "codeparrot": HubSource("codeparrot/codeparrot-clean", None, "content", min_bytes=4096),
}


def hub_documents(
    source: HubSource, split: str = "train", data_files: str | list[str] | None = None
) -> Iterator[bytes]:
    """Documents of a Hugging Face dataset, streamed (nothing is downloaded whole) and filtered; with
    `data_files`, `source.path` may name a local builder (parquet, json) for files on disk."""
    try:
        from datasets import load_dataset
    except ImportError:
        raise UserError(
            "streaming from the Hugging Face hub needs the datasets package; "
            "pip install 'rltok[hf]'"
        ) from None
    try:
        records = load_dataset(
            source.path, source.config, split=split, streaming=True, data_files=data_files
        )
        for record in records:
            text = record.get(source.field)
            if not isinstance(text, str):
                raise UserError(
                    f"{source.path} has no string field {source.field!r}; name its text field with --field"
                )
            data = text.encode("utf-8")
            if len(data) >= max(source.min_bytes, 1):
                yield data[: source.keep_bytes]
    # no network, an unknown name, unreadable files
    except (OSError, ValueError, ConnectionError) as e:
        raise UserError(
            f"cannot stream {source.path}: {str(e).splitlines()[0]}; check the name and the "
            "network (or pass local --data-files)"
        ) from None


class _SplitWriter:
    """Appends documents to one split's shard files, starting a new file every `shard_bytes`."""

    def __init__(self, folder: Path, shard_bytes: int):
        self.folder, self.shard_bytes = folder, shard_bytes
        self.shards: list[dict] = []
        self.file = None
        folder.mkdir(parents=True)

    def add(self, data: bytes) -> None:
        if self.file is None:
            self.name = f"{len(self.shards):05d}"
            self.file, self.ends, self.digest = (
                open(self.folder / f"{self.name}.bin", "wb"),
                [0],
                hashlib.sha256(),
            )
        self.file.write(data)
        self.digest.update(data)
        self.ends.append(self.ends[-1] + len(data))
        if self.ends[-1] >= self.shard_bytes:
            self._close_shard()

    def _close_shard(self) -> None:
        self.file.close()
        self.file = None
        np.asarray(self.ends, dtype="<i8").tofile(self.folder / f"{self.name}.idx")
        self.shards.append(
            {
                "name": self.name,
                "documents": len(self.ends) - 1,
                "bytes": self.ends[-1],
                "sha256": self.digest.hexdigest(),
            }
        )

    def close(self) -> list[dict]:
        if self.file is not None:
            self._close_shard()
        return self.shards


def write_shards(
    documents: Iterable[bytes],
    out: str | Path,
    source: str,
    shard_bytes: int = 1 << 28,
    max_bytes: int | None = None,
) -> dict:
    """Stream documents into OUT's shards (about `shard_bytes` each), stopping after `max_bytes`; the
    folder appears under its name only once complete. Returns the manifest."""
    out = Path(out)
    if out.exists():
        raise UserError(f"{out} already exists; choose another output folder or delete it")
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # left by a run killed outright: it was never complete
    try:
        writers = {split: _SplitWriter(tmp / split, shard_bytes) for split in SPLITS}
        total = 0
        for i, data in enumerate(documents):
            writers[holdout_split(i)].add(data)
            total += len(data)
            if max_bytes is not None and total >= max_bytes:
                break
        manifest = {
            "source": source,
            "split": f"of every {HOLDOUT_EVERY} documents the {HOLDOUT_EVERY - 1}th "
            "is val and the last test",
            "splits": {split: w.close() for split, w in writers.items()},
        }
        if not any(manifest["splits"].values()):
            raise UserError(f"{source} gave no documents (after its filters); nothing to shard")
        if not all(manifest["splits"][split] for split in SPLITS):
            raise UserError(
                f"{source} gave too few documents to fill train, val and test (at least "
                f"{HOLDOUT_EVERY} are needed); give it more text"
            )
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
        tmp.rename(out)
    except BaseException:  # an error or Ctrl-C: nothing half-written stays behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def shard_source(
    source: str,
    field: str | None = None,
    data_files: list[str] | None = None,
    min_bytes: int | None = None,
    keep_bytes: int | None = None,
) -> Iterator[bytes]:
    """The documents of SOURCE: `hf:fineweb`, `hf:codeparrot`, `hf:DATASET[:CONFIG]` (a hub dataset, or a
    local builder such as `hf:parquet` with data_files), or a local text file, folder or .jsonl file."""
    if not source.startswith("hf:"):
        return (data for _, data in iter_documents(source))
    name = source[3:]
    hub = HUB_SOURCES.get(name) or HubSource(
        *(name.split(":", 1) if ":" in name else (name, None)), field="text"
    )
    hub = HubSource(
        hub.path,
        hub.config,
        field or hub.field,
        hub.min_bytes if min_bytes is None else min_bytes,
        hub.keep_bytes if keep_bytes is None else keep_bytes,
    )
    return hub_documents(hub, data_files=data_files)


class ShardDocuments(Sequence[bytes]):
    """The documents of one split of a sharded corpus, read on demand through memory maps."""

    def __init__(self, folder: Path, shards: list[dict]):
        self.parts = []
        for shard in shards:
            ends = np.fromfile(folder / f"{shard['name']}.idx", dtype="<i8")
            data = np.memmap(folder / f"{shard['name']}.bin", dtype=np.uint8, mode="r")
            if (
                len(ends) != shard["documents"] + 1
                or ends[-1] != len(data)
                or ends[-1] != shard["bytes"]
            ):
                raise UserError(
                    f"shard {folder / shard['name']} does not match {MANIFEST} (truncated or edited); "
                    "shard the corpus again"
                )
            self.parts.append(Packed(data, ends[1:]))
        self.first = np.cumsum([0] + [len(p.ends) for p in self.parts])

    def packed(self) -> list[Packed]:
        """The shards as memory-mapped `Packed` streams (what TrainStream reads)."""
        return self.parts

    def __len__(self) -> int:
        return int(self.first[-1])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        k = int(np.searchsorted(self.first, i, side="right")) - 1
        part, j = self.parts[k], i - int(self.first[k])
        return part.data[(int(part.ends[j - 1]) if j else 0) : int(part.ends[j])].tobytes()


def is_sharded(path: str | Path) -> bool:
    """True for a folder written by `write_shards`."""
    return (Path(path) / MANIFEST).is_file()


def load_sharded(folder: str | Path) -> Corpus:
    """A sharded corpus whose splits read documents through memory maps."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        splits = {
            split: ShardDocuments(folder / split, manifest["splits"][split]) for split in SPLITS
        }
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(
            f"{folder} is not a complete sharded corpus ({e.__class__.__name__}: {e}); "
            "shard it again with `rltok data shard`"
        ) from None
    return Corpus(folder.name, splits["train"], splits["val"], splits["test"])
