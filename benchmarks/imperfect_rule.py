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
- `consistent`: the same teacher's mode made a function of the last `--context` bytes (a chunk ends
  where the teacher ended one in most of that context's occurrences on the training split, backing
  off to shorter contexts seen fewer than 4 times): is what the rule has over a learned segmentation
  that it cuts the same bytes the same way in every context?

Validation and the test split use each variant's own boundaries after training (`late` uses the exact
rule).

    python benchmarks/imperfect_rule.py --variants exact,late,noisy,uniform --seed 0 --steps 300 --out FILE.json
    python benchmarks/imperfect_rule.py --variants frozen,consistent --teacher RUN --seed 0 --steps 300 --out FILE.json
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
from rltok.boundaries.local_bytes import byte_windows
from rltok.boundaries.rules import UniformBoundaries, WordStartBoundaries
from rltok.config import BoundaryConfig, preset
from rltok.data import TrainStream, embedded_corpus
from rltok.evaluate import evaluate
from rltok.text import BOS, word_starts
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


class TeacherSegmentation(WordStartBoundaries):
    """Chunk ends taken from a trained policy, not learned by the model it trains: `segment`."""

    def segment(self, ids: Tensor) -> Tensor:
        """Chunk ends (B, L) of the byte ids."""
        raise NotImplementedError

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        return Decision(boundaries=force_first(forced if forced is not None else self.segment(ids)))


class FrozenMode(TeacherSegmentation):
    """A trained policy's most likely chunk ends on each window; the teacher is not part of the model."""

    teacher: nn.Module | None = None

    @torch.no_grad()
    def segment(self, ids: Tensor) -> Tensor:
        return self.teacher(ids, noise=torch.full(ids.shape, 0.5, device=ids.device)).boundaries


def context_ids(ids: Tensor, n: int) -> Tensor:
    """An id in [0, 257^n) per position for the n bytes ending there (BOS before the start)."""
    place = (BOS + 1) ** torch.arange(n - 1, -1, -1)  # byte t is the most significant
    return (byte_windows(ids, n) * place).sum(-1)


class ConsistentMode(TeacherSegmentation):
    """The teacher's mode as a function of the last `context` bytes: a chunk ends where it ended in
    most of that context's occurrences on the training split (shorter contexts where it is rare)."""

    context = 3
    ends: list[Tensor] = []  # per context length 1..context, indexed by context_ids: ends a chunk
    trusted: list[Tensor] = []  # the same: seen at least 4 times

    @classmethod
    def fit(cls, teacher: nn.Module, docs, batches: int = 64) -> float:
        """Count the teacher's chunk ends per context on training windows; the share of the
        teacher's decisions that the table reproduces on them."""
        cfg = teacher.config.train
        stream = TrainStream(docs, cfg.seq_len, cfg.batch_size, seed=12345)
        sizes = [(BOS + 1) ** n for n in range(1, cls.context + 1)]
        seen, ends = [torch.zeros(size) for size in sizes], [torch.zeros(size) for size in sizes]
        windows = []
        with torch.no_grad():
            for _ in range(batches):
                ids, _ = stream.next_batch()
                mode = teacher(ids, noise=torch.full(ids.shape, 0.5)).boundaries
                windows.append((ids, mode))
                for n, size in enumerate(sizes, start=1):
                    keys = context_ids(ids, n).flatten()
                    seen[n - 1] += torch.bincount(keys, minlength=size)
                    ends[n - 1] += torch.bincount(keys, mode.flatten().float(), minlength=size)
        cls.ends = [e / s.clamp(min=1) > 0.5 for e, s in zip(ends, seen)]
        cls.trusted = [s >= 4 for s in seen]
        agree = [
            (cls.decide(ids)[:, 1:] == mode[:, 1:].bool()).float().mean() for ids, mode in windows
        ]
        return float(torch.stack(agree).mean())

    @classmethod
    def decide(cls, ids: Tensor) -> Tensor:
        """Chunk ends by the longest context seen at least 4 times (the single byte otherwise)."""
        ids = ids.cpu()
        out = cls.ends[0][context_ids(ids, 1)]
        for n in range(2, cls.context + 1):
            keys = context_ids(ids, n)
            out = torch.where(cls.trusted[n - 1][keys], cls.ends[n - 1][keys], out)
        return out

    def segment(self, ids: Tensor) -> Tensor:
        return self.decide(ids).to(ids.device)


VARIANTS = {
    "exact": "word-start",
    "late": "imperfect-late",
    "noisy": "imperfect-noisy",
    "uniform": "uniform",
    "frozen": "imperfect-frozen",
    "consistent": "imperfect-consistent",
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
    parser.add_argument(
        "--teacher", help="a trained RL run whose mode `frozen` and `consistent` train on"
    )
    parser.add_argument(
        "--context", type=int, default=3, help="bytes that `consistent` decides from"
    )
    parser.add_argument("--out", default="benchmarks/results/imperfect_rule.json")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if unknown := set(variants) - set(VARIANTS):
        parser.error(
            f"unknown variants {', '.join(sorted(unknown))}; choose from {', '.join(VARIANTS)}"
        )
    agreement = None
    if {"frozen", "consistent"} & set(variants):
        if args.teacher is None:
            parser.error(
                "the frozen and consistent variants train on a teacher's segmentation: give --teacher RUN"
            )
        FrozenMode.teacher = rltok.load(args.teacher).eval()
        if FrozenMode.teacher.config.boundaries.method != "rl":
            parser.error(f"--teacher {args.teacher} is not an RL run: it has no policy to freeze")
        if "consistent" in variants:
            ConsistentMode.context = args.context
            agreement = ConsistentMode.fit(FrozenMode.teacher, embedded_corpus().train)
            print(
                f"the {args.context}-byte table reproduces {agreement:.3f} of the teacher's decisions"
            )
    LateWordStart.switch, NoisyWordStart.keep = args.switch, args.keep
    METHODS.update(
        {
            "imperfect-late": LateWordStart,
            "imperfect-noisy": NoisyWordStart,
            "imperfect-frozen": FrozenMode,
            "imperfect-consistent": ConsistentMode,
        }
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in variants:
            results.append(run(variant, args.seed, args.steps, Path(tmp) / variant))
            print(json.dumps(results[-1]))
    Path(args.out).write_text(
        json.dumps(
            {
                "switch": args.switch,
                "keep": args.keep,
                "teacher": args.teacher,
                "context": args.context,
                "table_agreement": agreement,
                "runs": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
