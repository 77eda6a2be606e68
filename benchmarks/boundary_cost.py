"""The boundary method's own work in a training step, apart from what its chunks cost the main network,
measured in one process and written as JSON (benchmarks/results/boundary_cost.json).

A learned method's step differs from a uniform step in two ways: its own work (the policy's forward,
its cue, its losses and their backward into the encoder) and the segmentation it draws (the main
network's work follows the chunk count, and the group estimator's rollouts add rows while the policy
is unsure). Step-time benchmarks see both at once; this one times the first alone: `model.boundary`'s
forward, `losses` and backward on a fixed encoder output of one real micro-batch, methods in rotating
order, beside a whole uniform training step on the same batch as the denominator.

    python benchmarks/boundary_cost.py [--rounds 20] [--threads 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from rltok.config import preset, set_setting
from rltok.data import TrainStream, embedded_corpus
from rltok.layers.blocks import rms_norm
from rltok.pretrained import build_model
from rltok.runtime import autocast
from rltok.step import make_optimizer, train_step

# name: boundary config fields over the tiny preset's
METHODS = {
    "uniform": {"method": "uniform"},
    # the RL step's machinery: the policy at its initial rate, no prior, one segmentation per text
    "rl-frozen": {"policy.lr_mult": 0.0, "prior.weight": 0.0, "group.size": 1},
    "rl": {},  # the preset (between rollouts: its steps once the policy is sure)
}


def boundary_pass(
    model: torch.nn.Module,
    x: torch.Tensor,
    ids: torch.Tensor,
    early_logits: torch.Tensor,
    precision: str,
) -> None:
    """The boundary method's forward (in the run's autocast), losses and backward on encoder states x,
    as a training step runs them (the early-exit head's logits are every method's work, so they come
    precomputed)."""
    x = x.detach().requires_grad_()
    with autocast(x.device, precision):
        decision = model.boundary(x, ids, early_logits)
    valid = torch.ones_like(ids, dtype=torch.bool)
    nll = torch.rand(ids.shape)  # the losses' work does not depend on the values
    terms, _ = model.boundary.losses(decision, nll, torch.rand(ids.shape), valid)
    if terms:
        sum(terms.values()).backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="benchmarks/results/boundary_cost.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    configs, models = {}, {}
    for name, fields in METHODS.items():
        configs[name] = preset("tiny")
        for path, value in fields.items():
            set_setting(configs[name].boundaries, path, value)
        torch.manual_seed(0)
        models[name] = build_model(configs[name]).train()
    cfg, uniform = configs["uniform"], models["uniform"]
    inputs, targets = TrainStream(
        embedded_corpus().train, cfg.train.seq_len, cfg.train.batch_size, seed=0
    ).next_batch()
    optimizer = make_optimizer(uniform, cfg)
    positions = torch.arange(inputs.size(1)).expand(inputs.shape)
    with torch.no_grad():
        x = uniform.encoder(uniform.embed(inputs), positions)  # the same states for every method
        early_logits = uniform.early_head(rms_norm(x))

    def timed(run) -> float:
        start = time.perf_counter()
        run()
        return (time.perf_counter() - start) * 1e3

    def uniform_step() -> None:
        train_step(uniform, optimizer, inputs, targets, cfg)

    passes = {
        name: (lambda m=model: boundary_pass(m, x, inputs, early_logits, cfg.train.precision))
        for name, model in models.items()
    }
    jobs = {
        **{f"{name}_boundary": run for name, run in passes.items()},
        "uniform_step": uniform_step,
    }
    for run in jobs.values():  # warm-up
        run()
        run()
    ms = {name: [] for name in jobs}
    for r in range(args.rounds):  # rotating order: the machine's drift hits every job alike
        names = list(jobs)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            ms[name].append(timed(jobs[name]))

    median = {name: statistics.median(values) for name, values in ms.items()}
    step = median["uniform_step"]
    extra = {
        name: statistics.median(
            a - b for a, b in zip(ms[f"{name}_boundary"], ms["uniform_boundary"])
        )
        for name in METHODS
        if name != "uniform"
    }
    report = {
        "benchmark": "boundary_cost",
        "date": time.strftime("%Y-%m-%d"),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "threads": args.threads,
        "micro_batch": list(inputs.shape),
        "rounds": args.rounds,
        "ms_median": median,
        "extra_over_uniform_ms": extra,
        "extra_over_uniform_share_of_a_uniform_step": {k: v / step for k, v in extra.items()},
        "ms_all": ms,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "ms_all"}, indent=1))


if __name__ == "__main__":
    main()
