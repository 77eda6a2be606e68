"""How strong is the RL estimator's signal at CPU scale? Train the `tiny` U-Net with the policy held at
chance (Bernoulli(rate) boundaries, no policy or rate loss), and at a few steps measure, per class of
byte, the mean score-function gradient of the return with respect to the boundary logit,
E[G_t (a_t - p_t)], as a z-score over held-out batches. A class the policy would learn to end chunks on
shows a large positive z; |z| < 2 everywhere means the estimator cannot tell the classes apart yet.

    python benchmarks/policy_signal.py [--steps 600] [--batches 12] [--out benchmarks/results/policy_signal.json]

`--from RUN [--data NAME]` measures once, on a trained U-Net whose boundary method is replaced by a
chance RL policy: does the estimator see a segmentation's worth once the language model uses it?

`--from RUN --group-size K` measures the group estimator instead, on an RL run's own policy (a
checkpoint directory works too): every held-out text segmented K times, leave-one-out advantages. It
shows where the gradient pushes a policy that is on its way to one segmentation or another.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

import rltok
from rltok.boundaries.estimator import batch_relative, discounted_returns, leave_one_out
from rltok.checkpoint import WEIGHTS, load_config, resolve
from rltok.config import preset
from rltok.data import TrainStream, embedded_corpus, load_corpus
from rltok.objective import next_byte_nll, with_rollouts
from rltok.pretrained import build_model
from rltok.runtime import autocast
from rltok.step import lr_factor, make_optimizer, set_learning_rate, train_step
from rltok.text import is_whitespace, word_starts

GAMMAS = (0.0, 0.5, 0.9, 0.99)


def byte_classes(ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Masks of whitespace, a word's first letter, vowels, other letters, and everything else."""
    space = is_whitespace(ids)
    letter = ((ids >= 65) & (ids <= 90)) | ((ids >= 97) & (ids <= 122))
    vowel = torch.isin(ids, torch.tensor(list(b"aeiouAEIOU")))
    first = letter & word_starts(ids)
    return {
        "whitespace": space,
        "first letter": first,
        "vowel": vowel & ~first,
        "consonant": letter & ~vowel & ~first,
        "other": ~space & ~letter,
    }


def z_scores(sums: dict[str, list[torch.Tensor]]) -> dict:
    """Mean over standard error of each key's collected values."""
    result = {}
    for key, parts in sums.items():
        values = torch.cat(parts).double()
        result[key] = round(float(values.mean() / (values.std() / len(values) ** 0.5)), 2)
    return result


@torch.no_grad()
def measure(model, batches, rate: float) -> dict:
    """z-score of E[G (a - p)] per byte class and gamma, over the batches."""
    model.eval()
    sums: dict[str, list[torch.Tensor]] = {}
    for inputs, targets in batches:
        with autocast(inputs.device, "auto"):
            out = model(inputs)
        valid = torch.ones_like(targets, dtype=torch.bool)
        reward = batch_relative(
            -next_byte_nll(out.logits, targets, valid)
            + next_byte_nll(out.early_logits, targets, valid),
            valid,
        )
        classes = byte_classes(inputs)
        for cls in classes.values():
            cls[:, 0] = False  # BOS is forced
        for gamma in GAMMAS:
            g = discounted_returns(reward, gamma, valid) * (out.boundaries.float() - rate)
            for name, mask in classes.items():
                sums.setdefault(f"{gamma}:{name}", []).append(g[mask])
    model.train()
    return z_scores(sums)


@torch.no_grad()
def measure_group(model, batches, group_size: int) -> dict:
    """z-score of E[G (a - p)] per byte class and gamma for the leave-one-out estimator on the model's
    own policy, each text segmented `group_size` times."""
    model.eval()
    sums: dict[str, list[torch.Tensor]] = {}
    for inputs, targets in batches:
        B = len(inputs)
        extra = torch.arange(B).repeat_interleave(group_size - 1)
        with autocast(inputs.device, "auto"):
            out = model(inputs, rollouts=extra)
        valid = torch.ones_like(targets, dtype=torch.bool)
        nll, early_nll, valid, rows = with_rollouts(
            out,
            next_byte_nll(out.logits, targets, valid),
            next_byte_nll(out.early_logits, targets, valid),
            targets,
            valid,
        )
        advantage, _ = leave_one_out(-nll + early_nll, rows, valid)
        score = out.decision.boundaries.float() - out.decision.probs.float()
        classes = byte_classes(inputs[rows])
        for cls in classes.values():
            cls[:, 0] = False  # BOS is forced
        for gamma in GAMMAS:
            g = discounted_returns(advantage, gamma, valid) * score
            for name, mask in classes.items():
                sums.setdefault(f"{gamma}:{name}", []).append(g[mask])
    return z_scores(sums)


def measure_trained(args: argparse.Namespace) -> None:
    """The signal on a trained run's weights, its boundary method swapped for a chance RL policy."""
    cfg = load_config(args.source)
    trained_with = cfg.boundaries.method
    torch.manual_seed(0)
    if args.group_size > 1:  # the run's own policy, measured by the group estimator
        model = rltok.load(args.source)
    else:  # the run's weights under a chance RL policy
        cfg.boundaries.method, cfg.boundaries.bpe_vocab = "rl", 0
        model = build_model(cfg)
        weights = load_file(resolve(args.source) / WEIGHTS)
        model.load_state_dict(
            {k: v for k, v in weights.items() if not k.startswith("boundary.")}, strict=False
        )
    corpus = load_corpus(args.data)
    held_out = TrainStream(
        corpus.val if args.group_size > 1 else corpus.test,
        cfg.train.seq_len,
        cfg.train.batch_size,
        seed=1,
    )
    batches = [held_out.next_batch() for _ in range(args.batches)]
    z = (
        measure_group(model, batches, args.group_size)
        if args.group_size > 1
        else measure(model, batches, cfg.boundaries.target_rate)
    )
    report = {
        "from": args.source,
        "trained_with": trained_with,
        "group_size": args.group_size,
        "rate": cfg.boundaries.target_rate,
        "gammas": GAMMAS,
        "positions_per_measurement": args.batches * cfg.train.batch_size * cfg.train.seq_len,
        "z": z,
    }
    print(json.dumps(report["z"]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batches", type=int, default=12, help="held-out batches per measurement")
    parser.add_argument("--out", default="benchmarks/results/policy_signal.json")
    parser.add_argument(
        "--from", dest="source", help="a trained U-Net run to measure instead of training one"
    )
    parser.add_argument(
        "--data",
        help="with --from: corpus whose test split (validation with --group-size) to measure on",
    )
    parser.add_argument(
        "--group-size",
        type=int,
        default=1,
        help="with --from: the group estimator with K "
        "segmentations per text, on the run's own RL policy",
    )
    args = parser.parse_args()
    if args.source:
        return measure_trained(args)

    cfg = preset("tiny")
    # policy stays at chance
    cfg.boundaries.policy.lr_mult, cfg.loss.policy, cfg.loss.rate = (0.0, 0.0, 0.0)
    torch.manual_seed(0)
    corpus = embedded_corpus()
    model = build_model(cfg)
    optimizer = make_optimizer(model, cfg)
    stream = TrainStream(corpus.train, cfg.train.seq_len, cfg.train.batch_size, seed=0)
    held_out = TrainStream(corpus.val, cfg.train.seq_len, cfg.train.batch_size, seed=1)
    batches = [held_out.next_batch() for _ in range(args.batches)]
    checkpoints = sorted({0, 50, args.steps // 4, args.steps // 2, args.steps})
    report = {
        "preset": "tiny",
        "rate": cfg.boundaries.target_rate,
        "gammas": GAMMAS,
        "positions_per_measurement": args.batches * cfg.train.batch_size * cfg.train.seq_len,
        "z": {},
    }
    for step in range(args.steps + 1):
        if step in checkpoints:
            report["z"][step] = measure(model, batches, cfg.boundaries.target_rate)
            print(step, json.dumps(report["z"][step]), flush=True)
        if step == args.steps:
            break
        set_learning_rate(optimizer, cfg, lr_factor(step, step / args.steps, cfg))
        train_step(model, optimizer, *stream.next_batch(), cfg)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
