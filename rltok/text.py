"""The byte vocabulary and the one definition of whitespace and word starts.

Ids 0-255 are bytes and 256 is BOS, which starts every sequence. The word-start rule, the metrics and
the inventory all read word edges from here, so a rule and the metric that scores it always agree.
"""

from __future__ import annotations

import torch
from torch import Tensor

BOS = 256
WHITESPACE = b" \t\n\r\f\v"  # ASCII whitespace, as bytes.isspace() counts it
# bits of a byte's gold code, where a corpus has gold words (rltok.data.gold): it ends a gold token,
# it starts one
GOLD_END, GOLD_START = 1, 2


def encode(text: str | bytes) -> Tensor:
    """UTF-8 bytes (or the bytes given) as a LongTensor of ids, BOS first."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return torch.tensor([BOS, *data], dtype=torch.long)


def decode(ids: Tensor | list[int]) -> bytes:
    """Ids back to bytes, BOS dropped."""
    return bytes(int(i) for i in (ids.tolist() if isinstance(ids, Tensor) else ids) if int(i) < BOS)


def is_whitespace(ids: Tensor) -> Tensor:
    """Whether each id is an ASCII whitespace byte (what whitespace recall counts)."""
    return torch.isin(ids, torch.tensor(list(WHITESPACE), device=ids.device))


def space_like(ids: Tensor) -> Tensor:
    """SpaceByte's rule: not an ASCII letter or digit and not a UTF-8 continuation byte (BOS counts)."""
    letter = ((ids >= 65) & (ids <= 90)) | ((ids >= 97) & (ids <= 122))
    digit = (ids >= 48) & (ids <= 57)
    continuation = (ids >= 0x80) & (ids <= 0xBF)
    return ~(letter | digit | continuation)


def word_start(space: Tensor, previous: Tensor) -> Tensor:
    """A word's first byte: not space-like, after a space-like byte."""
    return ~space & previous


def character_starts(ids: Tensor) -> Tensor:
    """Where a UTF-8 character starts: an ASCII byte or a lead byte, not a continuation byte."""
    return (ids < 0x80) | (ids >= 0xC0)


def word_starts(ids: Tensor) -> Tensor:
    """Where words start in (B, T) ids; a sequence's first id counts as following a space-like byte."""
    space = space_like(ids)
    previous = torch.cat([torch.ones_like(space[:, :1]), space[:, :-1]], dim=1)
    return word_start(space, previous)
