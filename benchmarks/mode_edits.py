"""What does a trained model say about one step from its policy's mode towards the word-start rule?
Take a learned policy's most likely segmentation (a = [p > 1/2]) of held-out windows, flip one decision
per window at a random byte of a kind, and report the change of the window's summed next-byte loss
(nats; negative: the model prefers the edit). The kinds: an end added at a word start the mode missed
and an end removed inside a word (steps towards the rule), and the two controls (an end removed at a
word start, one added inside a word).

    python benchmarks/mode_edits.py RUN [RUN ...] [--batches 8] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from boundary_value import flip_one, mean_and_error  # same directory

import rltok
from rltok.data import TrainStream, load_corpus
from rltok.objective import next_byte_nll
from rltok.text import word_starts


@torch.no_grad()
def measure(model: torch.nn.Module, docs: list[bytes], n_batches: int) -> dict:
    """Mean change of a window's loss (nats) per kind of edit, with its standard error."""
    torch.manual_seed(0)
    cfg = model.config
    stream = TrainStream(docs, cfg.train.seq_len, cfg.train.batch_size, seed=1)
    changes: dict[str, list[torch.Tensor]] = {}
    for _ in range(n_batches):
        inputs, targets = stream.next_batch()
        valid = torch.ones_like(targets, dtype=torch.bool)

        def window_loss(boundaries, inputs=inputs, targets=targets, valid=valid):
            logits = model(inputs, boundaries=boundaries).logits
            return next_byte_nll(logits, targets, valid).sum(1)

        mode = model(inputs, noise=torch.full(inputs.shape, 0.5)).boundaries
        starts, ends = word_starts(inputs), mode.bool()
        base = window_loss(mode)
        kinds = {
            "add an end at a missed word start": starts & ~ends,
            "remove an end inside a word": ~starts & ends,
            "remove an end at a word start (control)": starts & ends,
            "add an end inside a word (control)": ~starts & ~ends,
        }
        for kind, candidates in kinds.items():
            edited, rows = flip_one(mode, candidates)
            changes.setdefault(kind, []).append((window_loss(edited) - base)[rows])
    return {
        "windows": n_batches * cfg.train.batch_size,
        "loss_change_nats": {kind: mean_and_error(parts) for kind, parts in changes.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="trained RL runs")
    parser.add_argument("--data", help="corpus whose test split to use (default: the embedded one)")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--out", default="benchmarks/results/mode_edits.json")
    args = parser.parse_args()
    docs = load_corpus(args.data).test
    reports = []
    for run in args.runs:
        model = rltok.load(run).eval()
        if model.config.boundaries.method != "rl":
            parser.error(f"{run} is not an RL run: it has no policy whose mode to edit")
        reports.append({"run": run, **measure(model, docs, args.batches)})
        print(json.dumps(reports[-1]), flush=True)
    Path(args.out).write_text(json.dumps({"reports": reports}, indent=1))


if __name__ == "__main__":
    main()
