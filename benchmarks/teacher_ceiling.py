"""What a policy head that reads only the last n bytes can learn from a prior that teaches it, read
without training one: the prior's chunk ends are the top `rate` share of its cue (a parameter-free
function of a trained model's early-exit predictions) over train text; a head that sees n bytes can at
best learn, for each string of n bytes, the share of its occurrences the prior ends; its mode ends
chunks on the strings with the highest share, at the rate. Scored against the gold words on the
validation split (and the share of its chunk ends on characters' last bytes, where the character
rule ends every chunk), beside the same head taught by the gold words (the most n bytes can give),
so a prior is judged before a run is spent on it.

    python benchmarks/teacher_ceiling.py RUN [--data chinese] [--bytes 1048576] [--n 3]
        [--rates 0.205 0.336] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from gold_references import char_ends, score, share_at, string_shares, window_keys, window_oracle
from word_signal import cues

import rltok
from rltok.data import load_corpus
from rltok.text import GOLD_END, GOLD_START, character_starts

# the gold words' rate and one chunk per character's, on Chinese
RATES = (0.205, 0.336)


def early_cues(model, data: bytes) -> dict[str, np.ndarray]:
    """The priors' cues of the early-exit head at every byte of `data`, each with both signs (a
    negative beta teaches the bottom share), and the summed surprisal of the last 3 bytes."""
    pieces = [data[i : i + (1 << 16)] for i in range(0, len(data), 1 << 16)]  # bounded memory
    found = {}
    for piece in pieces:
        for name, values in cues(model, piece, character_starts(torch.tensor(list(piece)))).items():
            found[name] = torch.cat([found[name], values]) if name in found else values
    entropy = found["early: entropy of the next byte"]
    read = found["early: entropy of this byte (read-entropy)"]
    surprisal = found["early: surprisal of this byte"]
    span = found["early: surprisal of the last 3 bytes"]
    signed = {
        "entropy": entropy,
        "read-entropy": read,
        "entropy-drop": read - entropy,
        "surprisal": surprisal,
        "surprisal of the last 3 bytes": span,
    }
    out = {}
    for name, cue in signed.items():
        out[f"{name}, high"] = cue.numpy()
        out[f"{name}, low"] = -cue.numpy()
    return out


def taught_head(keys: np.ndarray, taught: np.ndarray, rate: float, n: int):
    """The chunk ends (doc, gold mask) -> bool per byte of a head taught `taught` (bool per train
    byte) that reads the last n bytes (`keys`): each string's share of taught ends, cut at the train
    split's top `rate` share."""
    seen, share = string_shares(keys, taught)
    threshold = np.quantile(share_at(seen, share, keys), 1.0 - rate)
    return lambda doc, _gold: share_at(seen, share, window_keys(doc, n)) > threshold


def scored(docs: list[bytes], gold: list[bytes], chunk_ends) -> dict:
    """The gold scores of `chunk_ends` and the share of its chunk ends on characters' last bytes."""
    ends = [np.asarray(chunk_ends(doc, mask), dtype=bool) for doc, mask in zip(docs, gold)]
    on_characters = sum(int((e & char_ends(doc)).sum()) for e, doc in zip(ends, docs))
    share = on_characters / max(sum(int(e.sum()) for e in ends), 1)
    computed = iter(ends)  # score reads the documents in the same order: no second pass
    return {**score(docs, gold, lambda *_: next(computed)), "on_character_ends": share}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a trained model whose early-exit head gives the cues")
    ap.add_argument("--data", default="chinese")
    ap.add_argument("--bytes", type=int, default=1 << 20, help="train bytes the teacher labels")
    ap.add_argument("--n", type=int, default=3, help="bytes the head reads")
    ap.add_argument("--rates", type=float, nargs="+", default=RATES, help="the heads' rates")
    ap.add_argument("--out", default="benchmarks/results/teacher_ceiling_chinese.json")
    args = ap.parse_args()
    started = time.perf_counter()
    corpus = load_corpus(args.data)
    train = b"".join(corpus.train)[: args.bytes - args.bytes % 512]  # whole windows
    docs, gold = corpus.val, corpus.gold_of("val")
    keys = window_keys(train, args.n)
    rows = {}
    for edge, edge_name in ((GOLD_END, "ends"), (GOLD_START, "starts")):
        rows[f"taught the gold word {edge_name}"] = scored(
            docs, gold, window_oracle(corpus.train, corpus.gold_of("train"), args.n, edge)
        )
    for name, cue in early_cues(rltok.load(args.run), train).items():
        for rate in args.rates:
            taught = cue > np.quantile(cue, 1.0 - rate)  # the prior's chunk ends, as teacher_ends
            head = taught_head(keys, taught, rate, args.n)
            rows[f"{name}, rate {rate}"] = scored(docs, gold, head)
    report = {
        "benchmark": "teacher_ceiling",
        "run": args.run,
        "corpus": corpus.name,
        "train_bytes": len(train),
        "head_reads": args.n,
        "split": "val",
        "rows": rows,
        "seconds": round(time.perf_counter() - started, 1),
    }
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    for name, row in rows.items():
        print(
            f"{name:48s} rate {row['rate']:.3f}  end F1 {row['gold_end_f1']:.3f} / "
            f"{row['gold_end_token_f1']:.3f}  start F1 {row['gold_start_f1']:.3f} / "
            f"{row['gold_start_token_f1']:.3f}  on characters' last bytes {row['on_character_ends']:.2f}"
        )


if __name__ == "__main__":
    main()
