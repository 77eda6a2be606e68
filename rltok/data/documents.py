"""Bytes in: a text file is one document, a .jsonl file one per line (its `text` field), a folder
every non-hidden file in it. Any bytes are accepted; a mostly binary file gets a warning."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path

from rltok.errors import UserError


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
