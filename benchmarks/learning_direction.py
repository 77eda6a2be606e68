"""Which segmentation does training improve fastest? Score the same held-out windows with two or more
checkpoints of one run under forced segmentations (random at the target rate, whitespace, word starts,
and the policy's own mode at each checkpoint) and report how far each one's bits per byte fell from
one checkpoint to the next.

A reward that scored a segmentation by how much a step on other texts lowers its loss (a one-step
lookahead: to first order, how much a step on the segmentation would lower the loss of other texts)
points where the fall is largest: towards the rule if the rule's bpb falls faster than the model's
own mode, back to the incumbent if the own mode's falls faster.

    python benchmarks/learning_direction.py RUN --steps 100,200,300 [--batches 4] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
from boundary_value import forced_segmentations  # same directory

import rltok
from rltok.data import TrainStream, load_corpus
from rltok.objective import next_byte_nll


@torch.no_grad()
def measure(run: str, steps: list[int], docs: list[bytes], n_batches: int) -> dict:
    """bpb of every (checkpoint, segmentation) pair on the same windows, and each one's fall per stretch."""
    models = {s: rltok.load(Path(run) / "checkpoints" / f"step-{s:08d}").eval() for s in steps}
    cfg = models[steps[0]].config
    torch.manual_seed(0)
    stream = TrainStream(docs, cfg.train.seq_len, cfg.train.batch_size, seed=1)
    bits: dict[str, dict[int, float]] = {}
    for _ in range(n_batches):
        inputs, targets = stream.next_batch()
        valid = torch.ones_like(targets, dtype=torch.bool)
        every = forced_segmentations(inputs, cfg.boundaries.target_rate)
        masks = {name: every[name] for name in every if name not in ("bos only", "every byte")}
        for s, model in models.items():
            masks[f"own mode at step {s}"] = model(
                inputs, noise=torch.full(inputs.shape, 0.5)
            ).boundaries
        for s, model in models.items():
            for name, mask in masks.items():
                nll = next_byte_nll(model(inputs, boundaries=mask).logits, targets, valid)
                row = bits.setdefault(name, {})
                row[s] = row.get(s, 0.0) + float(nll.mean()) / math.log(2) / n_batches
    return {
        "run": run,
        "windows": n_batches * cfg.train.batch_size,
        "bpb": {name: {s: round(v, 4) for s, v in row.items()} for name, row in bits.items()},
        "fall": {
            name: {f"{a}-{b}": round(row[a] - row[b], 4) for a, b in zip(steps, steps[1:])}
            for name, row in bits.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="training runs whose checkpoints to compare")
    parser.add_argument("--steps", default="100,200,300", help="checkpoint steps, in order")
    parser.add_argument("--data", help="corpus whose test split to use (default: the embedded one)")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--out", default="benchmarks/results/learning_direction.json")
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    docs = load_corpus(args.data).test
    reports = []
    for run in args.runs:
        reports.append(measure(run, steps, docs, args.batches))
        print(json.dumps(reports[-1]["fall"]), flush=True)
    Path(args.out).write_text(json.dumps({"steps": steps, "reports": reports}, indent=1))


if __name__ == "__main__":
    main()
