"""What does a word-aligned segmentation lose when a learned policy finds it late, or finds it only
in part? Train the tiny preset on the word-start rule (a chunk ends on a word's first byte) made
imperfect in the two ways an RL policy is:

- `exact`: the rule itself, from the first step;
- `late`: uniform random boundaries for the first `--switch` training steps, then the exact rule
  (a policy that needs that long to find word starts);
- `noisy`: from the first step, each word start ends a chunk with probability `--keep` and every
  other byte with the probability that keeps the rate at 0.2 (a policy that is still unsure);
- `uniform`: uniform random boundaries throughout, the reference;
- `frozen`: a trained RL policy's most likely segmentation (`--teacher CHECKPOINT`, a = [p > 1/2] on
  each window), frozen, from the first step: is what a policy learned worth as much as the rule once
  it no longer moves?

Validation and the test split use each variant's own boundaries after training (`late` uses the exact
rule).

    python benchmarks/imperfect_rule.py --variants exact,late,noisy,uniform --seed 0 --steps 300 --out FILE.json
    python benchmarks/imperfect_rule.py --variants frozen --teacher RUN --seed 0 --steps 300 --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
from torch import Tensor, nn

import rltok
from rltok.boundaries import METHODS
from rltok.boundaries.base import Decision, force_first, uniform_noise
from rltok.boundaries.rules import UniformBoundaries, WordStartBoundaries
from rltok.config import BoundaryConfig, preset
from rltok.data import embedded_corpus
from rltok.evaluate import evaluate
from rltok.text import word_starts
from rltok.train import train

WORD_START_SHARE = 0.188  # share of the embedded corpus's bytes that start a word (the rule's rate)


class NoisyWordStart(WordStartBoundaries):
    """Word starts kept with probability `keep`; other bytes drawn so that the rate stays at the target."""

    keep = 0.6

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__(d_model, cfg)
        self.elsewhere = (cfg.target_rate - self.keep * WORD_START_SHARE) / (1 - WORD_START_SHARE)

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        if forced is not None:
            return Decision(boundaries=force_first(forced))
        u = uniform_noise(noise, x)
        return Decision(
            boundaries=force_first(torch.where(word_starts(ids), u < self.keep, u < self.elsewhere))
        )


class LateWordStart(WordStartBoundaries):
    """Uniform boundaries for the first `switch` training forwards (one per step), the rule after."""

    switch = 150

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__(d_model, cfg)
        self.uniform = UniformBoundaries(d_model, cfg)
        self.training_steps = 0

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        if self.training and forced is None:
            self.training_steps += 1
            if self.training_steps <= self.switch:
                return self.uniform(x, ids, early_logits, noise)
        return super().forward(x, ids, early_logits, noise, forced)


class FrozenMode(WordStartBoundaries):
    """A trained policy's most likely chunk ends on each window; the teacher is not part of the model."""

    teacher: nn.Module | None = None

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        if forced is not None:
            return Decision(boundaries=force_first(forced))
        with torch.no_grad():
            mode = self.teacher(ids, noise=torch.full(ids.shape, 0.5, device=ids.device)).boundaries
        return Decision(boundaries=force_first(mode))


VARIANTS = {
    "exact": "word-start",
    "late": "imperfect-late",
    "noisy": "imperfect-noisy",
    "uniform": "uniform",
    "frozen": "imperfect-frozen",
}


def run(variant: str, seed: int, steps: int, out: Path) -> dict:
    """Train one variant and return its validation curve and final summary."""
    cfg = preset("tiny")
    cfg.boundaries.method = VARIANTS[variant]
    cfg.train.max_steps, cfg.train.seed, cfg.train.eval_every = steps, seed, 50
    corpus = embedded_corpus()
    summary = train(cfg, corpus, out, progress=False)
    test = evaluate(rltok.load(out), corpus.test, cfg.train.seq_len, cfg.train.batch_size)
    curve = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {
        "variant": variant,
        "seed": seed,
        "steps": steps,
        "val_bpb": {r["step"]: round(r["val_bpb"], 4) for r in curve if "val_bpb" in r},
        "val_word_start_recall": round(summary["val_word_start_recall"], 3),
        "val_word_start_precision": round(summary["val_word_start_precision"], 3),
        "val_rate": round(summary["val_rate"], 3),
        "test_bpb": round(test["bpb"], 4),
        "test_word_start_recall": round(test["word_start_recall"], 3),
        "test_word_start_precision": round(test["word_start_precision"], 3),
        "elapsed_s": round(summary["elapsed"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="exact,late,noisy,uniform")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument(
        "--switch", type=int, default=150, help="training steps of uniform boundaries for `late`"
    )
    parser.add_argument(
        "--keep", type=float, default=0.6, help="share of word starts kept by `noisy`"
    )
    parser.add_argument("--teacher", help="a trained RL run whose mode `frozen` trains on")
    parser.add_argument("--out", default="benchmarks/results/imperfect_rule.json")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if unknown := set(variants) - set(VARIANTS):
        parser.error(
            f"unknown variants {', '.join(sorted(unknown))}; choose from {', '.join(VARIANTS)}"
        )
    if "frozen" in variants:
        if args.teacher is None:
            parser.error(
                "the frozen variant trains on a teacher's segmentation: give --teacher RUN"
            )
        FrozenMode.teacher = rltok.load(args.teacher).eval()
        if FrozenMode.teacher.config.boundaries.method != "rl":
            parser.error(f"--teacher {args.teacher} is not an RL run: it has no policy to freeze")
    LateWordStart.switch, NoisyWordStart.keep = args.switch, args.keep
    METHODS.update(
        {
            "imperfect-late": LateWordStart,
            "imperfect-noisy": NoisyWordStart,
            "imperfect-frozen": FrozenMode,
        }
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in variants:
            results.append(run(variant, args.seed, args.steps, Path(tmp) / variant))
            print(json.dumps(results[-1]))
    Path(args.out).write_text(
        json.dumps(
            {"switch": args.switch, "keep": args.keep, "teacher": args.teacher, "runs": results},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
