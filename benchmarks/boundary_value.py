"""How much do boundaries matter to a trained model? Score held-out windows of a checkpoint under
forced segmentations (the BOS chunk only, random at the target rate, whitespace, word starts, every
byte, and a learned policy's own mode), and measure what one boundary is worth per class of byte: add
it to a random segmentation and take the change of the window's summed next-byte loss. Next to it
stands the spread of the discounted return G through which the RL estimator has to see that worth.

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
from rltok.text import is_whitespace, word_starts


def forced_segmentations(inputs: torch.Tensor, rate: float) -> dict[str, torch.Tensor]:
    """Named boundary masks for a batch; position 0 (BOS) always ends a chunk."""
    space = is_whitespace(inputs)
    word_start = word_starts(inputs)
    masks = {
        "bos only": torch.zeros_like(inputs),
        f"random {rate}": (torch.rand(inputs.shape) < rate).long(),
        "whitespace": space.long(),
        "word start": word_start.long(),
        "every byte": torch.ones_like(inputs),
    }
    for mask in masks.values():
        mask[:, 0] = 1
    return masks


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
def measure(model: torch.nn.Module, docs: list[bytes], n_batches: int) -> dict:
    """bpb under each forced segmentation, the worth of one more boundary per class, the return's spread."""
    torch.manual_seed(0)
    cfg = model.config
    rate, L = cfg.boundaries.target_rate, cfg.train.seq_len
    stream = TrainStream(docs, L, cfg.train.batch_size, seed=1)
    bits = {}
    deltas: dict[str, list[torch.Tensor]] = {}
    return_std = []
    for _ in range(n_batches):
        inputs, targets = stream.next_batch()
        valid = torch.ones_like(targets, dtype=torch.bool)

        def window_loss(
            boundaries: torch.Tensor, inputs=inputs, targets=targets, valid=valid
        ) -> tuple[torch.Tensor, torch.Tensor]:
            out = model(inputs, boundaries=boundaries)
            return next_byte_nll(out.logits, targets, valid), next_byte_nll(
                out.early_logits, targets, valid
            )

        masks = forced_segmentations(inputs, rate)
        # a learned policy's own most likely segmentation: a = [p > 1/2]
        if cfg.boundaries.method == "rl":
            masks["own mode"] = model(inputs, noise=torch.full(inputs.shape, 0.5)).boundaries
        for name, mask in masks.items():
            nll, early = window_loss(mask)
            bits[name] = bits.get(name, 0.0) + float(nll.sum()) / math.log(2)
            if name.startswith("random"):
                base, base_loss = mask, nll.sum(1)
                returns = discounted_returns(batch_relative(early - nll, valid), 0.99, valid)
                return_std.append(float(returns[:, : L - TAIL].std()))
        # one extra boundary per sequence at a random byte of each class, far enough from the end
        # that the loss of the bytes after it is counted
        for name, members in byte_classes(inputs).items():
            flipped, rows = flip_one(base, members & (base == 0))
            deltas.setdefault(name, []).append((window_loss(flipped)[0].sum(1) - base_loss)[rows])
    n_bytes = n_batches * cfg.train.batch_size * L
    report = {
        "method": cfg.boundaries.method,
        "windows": n_batches * cfg.train.batch_size,
        "bpb_by_segmentation": {name: round(total / n_bytes, 4) for name, total in bits.items()},
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
    docs = load_corpus(args.data).test
    reports = []
    for checkpoint in args.checkpoints:
        reports.append(
            {"checkpoint": checkpoint, **measure(rltok.load(checkpoint), docs, args.batches)}
        )
        print(json.dumps(reports[-1]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps({"corpus": args.data or "embedded", "reports": reports}, indent=1)
    )


if __name__ == "__main__":
    main()
