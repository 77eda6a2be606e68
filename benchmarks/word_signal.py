"""Does a trained model's own uncertainty tell word starts from the other character starts? On a
corpus with gold words (`--data chinese`), for every character's first byte of the first validation
bytes, the AUC with which each cue separates the characters that start a word from those inside one
(0.5: no signal; the prior's cues are parameter-free functions of these predictions). And, over
every byte, the AUC with which each cue read at byte t separates the bytes that end a character
(byte t + 1 starts one) from the others: can a prior on the model's own predictions find the
character rule's chunk ends (below 0.5: the cue read with the opposite sign does)?

Cues, each read at byte t (the early-exit head's and the full model's): the entropy of the
prediction of byte t + 1 (the preset's prior), the entropy of the prediction of byte t
(read-entropy), the surprisal of byte t, the summed surprisal of bytes t - 2 to t (a Chinese
character's worth, whatever its alignment) and, at character starts, the surprisal of the whole
previous character (its bytes' summed: how unexpected what came before was). Written as JSON.

    python benchmarks/word_signal.py RUN [RUN ...] [--data chinese] [--bytes 65536] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

import rltok
from rltok.boundaries.base import next_byte_entropy
from rltok.data import load_corpus
from rltok.data.gold import gold_codes
from rltok.text import GOLD_START, character_starts


def auc(scores: torch.Tensor, positive: torch.Tensor) -> float:
    """The probability that a positive scores above a negative (Mann-Whitney; ties are rare in
    floats and broken by position)."""
    ranks = scores.double().argsort().argsort().double() + 1
    n_pos, n_neg = positive.sum().item(), (~positive).sum().item()
    return ((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


@torch.no_grad()
def cues(model, data: bytes, starts: torch.Tensor, window: int = 512) -> dict[str, torch.Tensor]:
    """Each cue at every byte (L,), for the early-exit head and the full model, read window by
    window at the training length (each window starts from BOS, as in evaluation); `starts` marks
    the characters' first bytes."""
    pieces = [data[i : i + window] for i in range(0, len(data) - window + 1, window)]
    ids = torch.stack([rltok.encode(p) for p in pieces])
    out = model(ids, noise=torch.full(ids.shape, 0.5))
    found = {}
    for head, logits in (("early", out.early_logits), ("full", out.logits)):
        logits = logits[:, :-1].float()  # position i predicts byte i (BOS dropped)
        entropy = next_byte_entropy(logits)  # of the prediction of byte i
        surprisal = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        following = torch.cat([entropy[:, 1:], entropy[:, -1:]], 1)
        found[f"{head}: entropy of the next byte"] = following.flatten()
        found[f"{head}: entropy of this byte (read-entropy)"] = entropy.flatten()
        found[f"{head}: surprisal of this byte"] = surprisal.flatten()
        # bytes t - 2 .. t: one Chinese character's worth, whatever its alignment
        span = F.avg_pool1d(F.pad(surprisal, (2, 0))[:, None], 3, stride=1)[:, 0] * 3
        found[f"{head}: surprisal of the last 3 bytes"] = span.flatten()
        found[f"{head}: surprisal of the previous character"] = previous_character_sum(
            surprisal.flatten(), starts
        )
    return found


def previous_character_sum(values: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """At each character start, the sum of `values` over the previous character's bytes."""
    out = torch.zeros_like(values)
    bounds = starts.nonzero().flatten().tolist() + [len(values)]
    for prev, here in zip(bounds, bounds[1:-1]):
        out[here] = values[prev:here].sum()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--data", default="chinese")
    ap.add_argument("--bytes", type=int, default=65536)
    ap.add_argument("--out", default="benchmarks/results/word_signal_chinese.json")
    args = ap.parse_args()
    corpus = load_corpus(args.data)
    size = args.bytes - args.bytes % 512  # whole windows
    data, gold = corpus.val[0][:size], corpus.gold_of("val")[0][:size]
    lead = character_starts(torch.tensor(list(data)))  # a character's first byte
    word_start = torch.from_numpy(gold_codes(gold) & GOLD_START > 0)
    result = {
        "data": args.data,
        "bytes": len(data),
        "character_starts": int(lead.sum()),
        "word_start_share": word_start[lead].float().mean().item(),
        "runs": {},
        "character_ends": {},
    }
    ends = lead[1:]  # byte t ends a character when byte t + 1 starts one
    for run in args.runs:
        model = rltok.load(run)
        found = cues(model, data, lead)
        scores = {
            name: round(auc(values[lead][1:], word_start[lead][1:]), 4)
            for name, values in found.items()
        }
        at_ends = {
            name: round(auc(values[:-1], ends), 4)
            for name, values in found.items()
            if "previous character" not in name  # defined at character starts only
        }
        result["runs"][Path(run).name] = scores
        result["character_ends"][Path(run).name] = at_ends
        print(
            Path(run).name, json.dumps({"word starts": scores, "character ends": at_ends}, indent=1)
        )
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
