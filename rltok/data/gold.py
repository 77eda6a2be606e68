"""Gold word boundaries: text written without spaces, with where its words end kept beside it.

A gold segmentation is stored as a mask the length of its document, one byte per byte: 1 where a gold
token ends (its last byte), 0 elsewhere. Tokens tile the document, so a token starts at byte 0 and
after every end; a newline is a token of its own. Two corpora carry one: the PKU People's Daily corpus
(Chinese, segmented by hand) and English with its spaces and tabs removed.
"""

from __future__ import annotations

import re

import numpy as np

from rltok.text import GOLD_END, GOLD_START

# PKU's annotation: `word/tag` separated by spaces; a compound is bracketed, `[word/n word/n]nt`
_PKU_TOKEN = re.compile(r"\[?(.+)/[A-Za-z]+(?:\][A-Za-z]+)?")


def token_ends(tokens: list[bytes]) -> bytes:
    """The end mask of a text made of `tokens` laid end to end."""
    mask = bytearray()
    for token in tokens:
        mask += bytes(len(token) - 1) + b"\x01"
    return bytes(mask)


def pku_line(line: str) -> list[bytes]:
    """The words of one annotated PKU line, tags and brackets removed, as UTF-8."""
    words = []
    for item in line.split():
        match = _PKU_TOKEN.fullmatch(item)
        if match is None:
            raise ValueError(f"not a PKU word/tag item: {item!r}")
        words.append(match[1].encode())
    return words


def pku_documents(text: str, lines_per_doc: int) -> list[tuple[bytes, bytes]]:
    """(text, end mask) of each run of `lines_per_doc` annotated lines: the words joined without
    spaces, each line ending in a newline token."""
    lines = [line for line in text.splitlines() if line.strip()]
    docs = []
    for first in range(0, len(lines), lines_per_doc):
        tokens = [
            token
            for line in lines[first : first + lines_per_doc]
            for token in [*pku_line(line), b"\n"]
        ]
        docs.append((b"".join(tokens), token_ends(tokens)))
    return docs


def without_spaces(data: bytes) -> tuple[bytes, bytes]:
    """(text, end mask) of `data` with its spaces and tabs removed: a token is a run of other bytes
    between them, and each other whitespace byte (a newline, a carriage return) is a token of its own."""
    tokens = [t for t in re.split(rb"[ \t]+|([\n\r\f\v])", data) if t]
    return b"".join(tokens), token_ends(tokens)


def gold_codes(ends: bytes) -> np.ndarray:
    """The gold code (uint8) of every byte of a document from its end mask: GOLD_END on a token's
    last byte, GOLD_START on its first (byte 0 and every byte after an end)."""
    end = np.frombuffer(ends, dtype=np.uint8)
    start = np.concatenate([np.ones(min(len(end), 1), np.uint8), end[:-1]])
    return end * GOLD_END | start * GOLD_START
