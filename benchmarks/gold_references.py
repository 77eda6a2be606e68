"""What segmentations that need no training score against a corpus's gold words, on its test split:
one chunk per character, a BPE's tokens (fitted on the train split to the target rate, and of a fixed
vocabulary), BPE guidance's causal starts, uniform random chunk ends at the target rate, the gold
words themselves (which must score 1), and the most a policy head that reads only the last N bytes
can score: taught by the gold words, it ends a chunk where most of the train split's occurrences of
those N bytes end a word (3 bytes: one Chinese character; 6: two). The same scores as `rltok eval`
(rltok/gold_scores.py), read over whole documents (the first byte of each is not a decision)
instead of a model's windows.

    python benchmarks/gold_references.py --data chinese [--rate 0.2] [--vocab 8192] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from rltok.boundaries.base import decided_positions
from rltok.bpe import fit_bpe, train_bpe
from rltok.data import load_corpus
from rltok.data.gold import gold_codes
from rltok.gold_scores import gold_counts, gold_metrics
from rltok.text import GOLD_END, GOLD_START


def char_ends(data: bytes) -> np.ndarray:
    """1 on the last byte of every UTF-8 character (the char rule, read with the whole text)."""
    ids = np.frombuffer(data, dtype=np.uint8)
    continuation = (ids >= 0x80) & (ids < 0xC0)
    return np.append(~continuation[1:], True)


def token_ends(bpe, data: bytes) -> np.ndarray:
    """1 on the last byte of every token of the BPE's ordinary encoding."""
    ends = np.zeros(len(data), dtype=bool)
    ends[np.array(bpe.encode(data)[1], dtype=np.int64) - 1] = True
    return ends


def causal_starts(bpe, data: bytes) -> np.ndarray:
    """1 on the first byte of every token of BPE guidance's causal walk (where its chunks end)."""
    return np.array(bpe.causal_starts(list(data)), dtype=bool)


def window_keys(data: bytes, n: int) -> np.ndarray:
    """The last n bytes at every position as one integer (bytes before the start read as 0)."""
    ids = np.concatenate([np.zeros(n - 1, dtype=np.int64), np.frombuffer(data, np.uint8)])
    return sum(ids[i : len(ids) - n + 1 + i] << (8 * (n - 1 - i)) for i in range(n))


def string_shares(keys: np.ndarray, hits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct string of `keys` (sorted) and the share of its occurrences that are `hits`."""
    seen, inverse = np.unique(keys, return_inverse=True)
    return seen, np.bincount(inverse, weights=hits) / np.bincount(inverse)


def share_at(seen: np.ndarray, share: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The share of each key's string (0 for a string never seen)."""
    at = np.clip(np.searchsorted(seen, keys), 0, len(seen) - 1)
    return np.where(seen[at] == keys, share[at], 0.0)


def window_oracle(docs: list[bytes], gold: list[bytes], n: int, edge: int):
    """Chunk ends where most of the train documents' occurrences of the last n bytes carry the gold
    `edge`: the best deterministic function of n bytes (an unseen window ends no chunk)."""
    keys = np.concatenate([window_keys(d, n) for d in docs])
    hits = np.concatenate([gold_codes(g) & edge > 0 for g in gold])
    seen, share = string_shares(keys, hits)
    return lambda doc, _: share_at(seen, share, window_keys(doc, n)) > 0.5


def score(docs: list[bytes], gold: list[bytes], chunk_ends) -> dict:
    """Gold scores of `chunk_ends(doc, end_mask)` over the documents, and the rate."""
    counts, ends, decided_total = torch.zeros(12, dtype=torch.float64), 0, 0
    for doc, mask in zip(docs, gold):
        chosen = torch.from_numpy(np.asarray(chunk_ends(doc, mask), dtype=bool))[None]
        codes = torch.from_numpy(gold_codes(mask).astype(np.int64))[None]
        decided = decided_positions(torch.ones_like(chosen))
        counts += gold_counts(chosen, codes, decided)
        ends += int((chosen & decided).sum())
        decided_total += int(decided.sum())
    return {"rate": ends / decided_total, **gold_metrics(counts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a prepared corpus with gold words")
    parser.add_argument("--rate", type=float, default=0.2)
    parser.add_argument("--vocab", type=int, default=8192, help="the fixed-vocabulary BPE's size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    args = parser.parse_args()
    corpus = load_corpus(args.data)
    if corpus.gold is None:
        parser.error(f"{args.data} has no gold words: prepare chinese or english-nospace")
    docs, gold = corpus.test, corpus.gold_of("test")
    started = time.perf_counter()
    fitted = fit_bpe(corpus.train, args.rate)
    fixed = train_bpe(corpus.train, args.vocab)
    generator = np.random.default_rng(args.seed)
    rows = {
        "char": lambda d, _: char_ends(d),
        f"bpe tokens, fitted to rate {args.rate} ({fitted.vocab_size} tokens)": lambda d, _: (
            token_ends(fitted, d)
        ),
        "bpe guidance's causal starts, the same BPE": lambda d, _: causal_starts(fitted, d),
        f"bpe tokens, {fixed.vocab_size} tokens": lambda d, _: token_ends(fixed, d),
        f"uniform at rate {args.rate}": lambda d, _: generator.random(len(d)) < args.rate,
        "gold word starts (the oracle)": lambda _, mask: gold_codes(mask) & GOLD_START > 0,
    }
    train_gold = corpus.gold_of("train")
    for n in (3, 6):
        for edge, name in ((GOLD_END, "ends"), (GOLD_START, "starts")):
            oracle = window_oracle(corpus.train, train_gold, n, edge)
            rows[f"the last {n} bytes, taught the gold word {name}"] = oracle
    report = {
        "benchmark": "gold_references",
        "corpus": corpus.name,
        "split": "test",
        "bytes": sum(map(len, docs)),
        "rows": {name: score(docs, gold, ends) for name, ends in rows.items()},
        "seconds": round(time.perf_counter() - started, 1),
    }
    text = json.dumps(report, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
