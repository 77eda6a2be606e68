"""A byte-level BPE (trained with `tokenizers`) and the two ways the library cuts bytes with it.

Bytes are mapped one-to-one onto the first 256 code points (latin-1), so every token is a byte string
and offsets are byte offsets, whatever the encoding of the text. Pre-tokens are a run of ASCII
whitespace followed by a run of anything else, so a token can carry its leading space (" love").

- `encode`: the ordinary BPE tokenization (the `bpe-lm` reference model reads these ids).
- `causal_starts`: where tokens start when bytes arrive one at a time. BPE's own segmentation of a
  word depends on the bytes after it, which would let a boundary leak the future; so a token is
  extended while the bytes so far are still the prefix of some vocabulary entry, and a new token
  starts at the first byte where they are not. On English text this agrees with BPE's token starts
  on about 90% of positions at the same rate (see `benchmarks` / the closing notes).
"""

from __future__ import annotations

import functools
import json

import torch
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
from torch import nn

from rltok.text import BOS, WHITESPACE

SPACE = f"[{WHITESPACE.decode()}]"
PRE_TOKEN = Regex(f"{SPACE}*[^{WHITESPACE.decode()}]+|{SPACE}+")
ALPHABET = [chr(i) for i in range(256)]
CALIBRATION_BYTES = 200_000  # of training text, to choose the vocabulary size for a target rate


def _text(data: bytes) -> str:
    return data.decode("latin-1")


class CausalWalk:
    """The state of `ByteBPE.causal_starts` between bytes: the token grown so far."""

    def __init__(self, prefixes: set[bytes]):
        self.prefixes, self.current = prefixes, b""

    def push(self, i: int) -> int:
        """1 if byte id i starts a token."""
        grown = self.current + bytes((i,)) if i < BOS else b""
        if i < BOS and self.current and grown in self.prefixes:
            self.current = grown
            return 0
        self.current = grown[-1:]  # a new token (empty after BOS)
        return 1


class ByteBPE:
    """A vocabulary of byte strings in merge order (the 256 bytes first) and its merges."""

    def __init__(self, tokens: list[bytes], merges: list[tuple[bytes, bytes]]):
        self.tokens, self.merges = tokens, merges
        self._tokenizer: Tokenizer | None = None

    @property
    def vocab_size(self) -> int:
        """Number of tokens."""
        return len(self.tokens)

    @functools.cached_property
    def prefixes(self) -> set[bytes]:
        """Every prefix of every token: what `causal_starts` may still grow into."""
        return {t[:k] for t in self.tokens for k in range(1, len(t) + 1)}

    def truncated(self, vocab_size: int) -> ByteBPE:
        """The same BPE stopped early: ids follow merge order, so its first vocab_size tokens and the
        merges that make them are exactly what training with that size gives."""
        kept = set(self.tokens[:vocab_size])
        return ByteBPE(self.tokens[:vocab_size], [(a, b) for a, b in self.merges if a + b in kept])

    def causal_starts(self, ids: list[int]) -> list[int]:
        """1 where a token starts, deciding at each byte from the bytes up to it; BOS (id 256) is a
        start and resets the walk."""
        walk = self.walk()
        return [walk.push(i) for i in ids]

    def walk(self) -> CausalWalk:
        """`causal_starts` one byte at a time (generation decides while the bytes arrive)."""
        return CausalWalk(self.prefixes)

    def rate(self, data: bytes) -> float:
        """Fraction of bytes where `causal_starts` begins a token."""
        return sum(self.causal_starts(list(data))) / max(len(data), 1)

    @property
    def tokenizer(self) -> Tokenizer:
        """The `tokenizers` object for ordinary BPE encoding."""
        if self._tokenizer is None:
            vocab = {_text(t): i for i, t in enumerate(self.tokens)}
            merges = [(_text(a), _text(b)) for a, b in self.merges]
            self._tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
            self._tokenizer.pre_tokenizer = pre_tokenizers.Split(PRE_TOKEN, behavior="isolated")
        return self._tokenizer

    def encode(self, data: bytes) -> tuple[list[int], list[int]]:
        """Token ids of `data` and the byte offset at which each token ends (exclusive)."""
        encoding = self.tokenizer.encode(_text(data))
        return encoding.ids, [end for _, end in encoding.offsets]

    def to_bytes(self) -> bytes:
        """JSON (latin-1 strings), to be stored with the weights."""
        return json.dumps(
            {
                "tokens": [_text(t) for t in self.tokens],
                "merges": [[_text(a), _text(b)] for a, b in self.merges],
            }
        ).encode()

    @classmethod
    def from_bytes(cls, blob: bytes) -> ByteBPE:
        """Inverse of `to_bytes`."""
        data = json.loads(blob)
        return cls(
            [t.encode("latin-1") for t in data["tokens"]],
            [(a.encode("latin-1"), b.encode("latin-1")) for a, b in data["merges"]],
        )


def train_bpe(docs: list[bytes], vocab_size: int) -> ByteBPE:
    """A byte-level BPE of up to vocab_size tokens trained on the documents."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Split(PRE_TOKEN, behavior="isolated")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=ALPHABET, show_progress=False
    )
    tokenizer.train_from_iterator((_text(d) for d in docs), trainer=trainer)
    model = json.loads(tokenizer.to_str())["model"]
    tokens = [
        t.encode("latin-1") for t, _ in sorted(model["vocab"].items(), key=lambda item: item[1])
    ]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return ByteBPE(tokens, [(a.encode("latin-1"), b.encode("latin-1")) for a, b in merges])


def fit_bpe(
    docs: list[bytes], target_rate: float, vocab_size: int = 0, max_vocab: int = 131_072
) -> ByteBPE:
    """The BPE of `vocab_size` tokens, or (0) the smallest whose causal start rate is at most the target
    (the largest if none is), measured on the last CALIBRATION_BYTES of the documents, held out from
    the BPE's training because a BPE cuts the text it was trained on into fewer tokens."""
    if vocab_size:
        return train_bpe(docs, vocab_size)
    text = b"".join(docs)
    # else calibrate in-sample: too little text to spare
    held_out = len(text) > 2 * CALIBRATION_BYTES
    sample = text[-CALIBRATION_BYTES:] if held_out else text
    full = train_bpe([text[:-CALIBRATION_BYTES]] if held_out else docs, max_vocab)
    low, high = 256, full.vocab_size
    if full.rate(sample) > target_rate:
        return full
    while high - low > max(64, high // 64):
        middle = (low + high) // 2
        if full.truncated(middle).rate(sample) > target_rate:
            low = middle
        else:
            high = middle
    return full.truncated(high)


class StoredBPE(nn.Module):
    """A BPE kept in the state dict (as the bytes of its JSON), so it travels inside every checkpoint
    and under its checksum; empty until `store` is given the BPE trained on the training split."""

    def __init__(self):
        super().__init__()
        self.register_buffer("blob", torch.zeros(0, dtype=torch.uint8))
        self.bpe: ByteBPE | None = None

    def store(self, bpe: ByteBPE) -> None:
        """Keep this BPE (and save it with the weights from now on)."""
        self.bpe = bpe
        self.blob = torch.frombuffer(bytearray(bpe.to_bytes()), dtype=torch.uint8).clone()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        stored = state_dict.get(prefix + "blob")
        if stored is not None:
            self.blob = torch.empty_like(stored)  # its size is the saved tokenizer's
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.bpe = ByteBPE.from_bytes(self.blob.numpy().tobytes()) if len(self.blob) else None

    def get(self) -> ByteBPE:
        """The stored BPE; an error if none was stored."""
        if self.bpe is None:
            raise RuntimeError(
                "this model holds no trained BPE; train it with rltok.train, which fits one"
            )
        return self.bpe
