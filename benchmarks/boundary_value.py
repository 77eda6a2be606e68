"""How much do boundaries matter to a trained model? Score held-out windows of a checkpoint under
forced segmentations (the BOS chunk only, random at the target rate, whitespace, word starts, every
byte, and the model's own: a learned policy's mode, a rule's chunks), and measure what one boundary
is worth per class of byte: add it to a random segmentation and take the change of the window's
summed next-byte loss. Next to it stands the spread of the discounted return G through which the RL
estimator has to see that worth. On a corpus with gold words (`--data chinese`, `english-nospace`)
the segmentations are the gold word starts, every character's first byte and a random choice of
them at the target rate instead of whitespace and word starts, and the classes of byte are a word's
first byte, a character's first byte inside a word, and a character's later bytes.

    python benchmarks/boundary_value.py CHECKPOINT [CHECKPOINT ...] [--data NAME] [--batches 8] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
from policy_signal import byte_classes  # same directory

import rltok
from rltok.boundaries.estimator import batch_relative, discounted_returns
from rltok.data import TrainStream, load_corpus
from rltok.objective import next_byte_nll
from rltok.text import GOLD_END, GOLD_START, character_starts, is_whitespace, word_starts


def forced_segmentations(
    inputs: torch.Tensor, rate: float, codes: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """Named boundary masks for a batch, from the gold codes of its bytes where given; position 0
    (BOS) always ends a chunk."""
    masks = {
        "bos only": torch.zeros_like(inputs),
        f"random {rate}": (torch.rand(inputs.shape) < rate).long(),
    }
    if codes is None:
        masks["whitespace"] = is_whitespace(inputs).long()
        masks["word start"] = word_starts(inputs).long()
    else:
        chars = character_starts(inputs)
        share = rate / chars.float().mean().clamp(min=rate)  # of the characters, to meet the rate
        masks["gold word starts"] = ((codes & GOLD_START) > 0).long()
        masks["character starts"] = chars.long()
        masks[f"random character starts {rate}"] = (
            chars & (torch.rand(inputs.shape) < share)
        ).long()
    masks["every byte"] = torch.ones_like(inputs)
    for mask in masks.values():
        mask[:, 0] = 1
    return masks


def gold_classes(inputs: torch.Tensor, codes: torch.Tensor) -> dict[str, torch.Tensor]:
    """Masks of a word's first byte, a character's first byte inside a word, and a later byte."""
    word, chars = (codes & GOLD_START) > 0, character_starts(inputs)
    return {
        "word start": word,
        "character start inside a word": chars & ~word,
        "inside a character": ~chars & ~word,
    }


TAIL = 100  # bytes after an added or removed boundary whose loss is counted, at least


def flip_one(base: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """`base` with one decision flipped per row at a random candidate byte (never BOS, none in the
    last TAIL bytes); the rows that had a candidate."""
    candidates = candidates.clone()
    candidates[:, 0] = False
    candidates[:, -TAIL:] = False
    flipped, rows = base.clone(), []
    for row in range(len(base)):
        positions = candidates[row].nonzero().flatten()
        if len(positions):
            at = positions[torch.randint(len(positions), (1,))]
            flipped[row, at] = 1 - flipped[row, at]
            rows.append(row)
    return flipped, rows


def mean_and_error(parts: list[torch.Tensor]) -> dict:
    """Mean of the values and its standard error (None where there are too few values for it)."""
    values = torch.cat(parts).double()
    mean = round(float(values.mean()), 4) if len(values) else None
    error = round(float(values.std() / len(values) ** 0.5), 4) if len(values) > 1 else None
    return {"mean": mean, "standard_error": error}


@torch.no_grad()
def measure(
    model: torch.nn.Module, docs: list[bytes], n_batches: int, gold: list[bytes] | None = None
) -> dict:
    """bpb under each forced segmentation, the worth of one more boundary per class, the return's
    spread; `gold`: the documents' gold word ends, where the corpus has them."""
    torch.manual_seed(0)
    cfg = model.config
    rate, L = cfg.boundaries.target_rate, cfg.train.seq_len
    stream = TrainStream(docs, L, cfg.train.batch_size, seed=1, gold=gold)
    bits = {}
    deltas: dict[str, list[torch.Tensor]] = {}
    return_std = []
    for _ in range(n_batches):
        inputs, targets, *codes = stream.next_batch(gold=gold is not None)
        codes = codes[0] if codes else None
        valid = torch.ones_like(targets, dtype=torch.bool)

        def window_loss(
            boundaries: torch.Tensor, inputs=inputs, targets=targets, valid=valid
        ) -> tuple[torch.Tensor, torch.Tensor]:
            out = model(inputs, boundaries=boundaries)
            return next_byte_nll(out.logits, targets, valid), next_byte_nll(
                out.early_logits, targets, valid
            )

        masks = forced_segmentations(inputs, rate, codes)
        # the model's own: a learned policy's most likely segmentation (a = [p > 1/2]), a rule's
        # chunks (uniform's: random at its rate), the gold oracle's words
        method = cfg.boundaries.method
        if method == "gold-end":
            masks["own"] = ((codes & GOLD_END) > 0).long()
            masks["own"][:, 0] = 1
        elif method in ("gold", "uniform"):
            masks["own"] = masks["gold word starts" if method == "gold" else f"random {rate}"]
        else:
            masks["own"] = model(inputs, noise=torch.full(inputs.shape, 0.5)).boundaries
        for name, mask in masks.items():
            nll, early = window_loss(mask)
            bits[name] = bits.get(name, 0.0) + float(nll.sum()) / math.log(2)
            if name.startswith("random"):
                base, base_loss = mask, nll.sum(1)
                returns = discounted_returns(batch_relative(early - nll, valid), 0.99, valid)
                return_std.append(float(returns[:, : L - TAIL].std()))
        # one extra boundary per sequence at a random byte of each class, far enough from the end
        # that the loss of the bytes after it is counted
        classes = byte_classes(inputs) if codes is None else gold_classes(inputs, codes)
        for name, members in classes.items():
            flipped, rows = flip_one(base, members & (base == 0))
            deltas.setdefault(name, []).append((window_loss(flipped)[0].sum(1) - base_loss)[rows])
    n_bytes = n_batches * cfg.train.batch_size * L
    report = {
        "method": cfg.boundaries.method,
        "windows": n_batches * cfg.train.batch_size,
        "bpb_by_segmentation": {name: round(total / n_bytes, 4) for name, total in bits.items()},
        # what the main network is worth to the model: BOS alone against its own chunks
        "lean": round((bits["bos only"] - bits["own"]) / n_bytes, 4),
        "one_more_boundary_nats": {},
        "return_std_nats": round(sum(return_std) / len(return_std), 3),
    }
    for name, parts in deltas.items():
        report["one_more_boundary_nats"][name] = mean_and_error(parts)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument(
        "--data", help="corpus whose test split to use (default: the embedded corpus)"
    )
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--out", default="benchmarks/results/boundary_value.json")
    args = parser.parse_args()
    corpus = load_corpus(args.data)
    reports = []
    for checkpoint in args.checkpoints:
        model = rltok.load(checkpoint)
        found = measure(model, corpus.test, args.batches, corpus.gold_of("test"))
        reports.append({"checkpoint": checkpoint, **found})
        print(json.dumps(reports[-1]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps({"corpus": args.data or "embedded", "reports": reports}, indent=1)
    )


if __name__ == "__main__":
    main()
