"""Training throughput of RL boundaries against uniform boundaries (the policy's overhead) and a flat
byte transformer of about the same size, measured in one run, interleaved, and written as JSON.
The VM's speed can halve within a minute, so ratios are taken within each round (the methods'
steps run back to back, in an order that rotates) and the median round ratio is reported.

An RL policy that learns moves its rate (early in training it overshoots the target), and the main
network's work follows the number of chunks. `rl-fixed-rate` runs the whole RL step (sampling, returns,
policy loss and its gradient into the encoder) with the policy head's learning rate at zero, so its
chunk count matches uniform's: that ratio is the policy's own overhead, the one the 1.05 target is for.

    python benchmarks/train_throughput.py [--preset tiny] [--rounds 12] [--steps 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from rltok.config import preset
from rltok.data import TrainStream, embedded_corpus
from rltok.model import build_model
from rltok.runtime import default_device
from rltok.train import make_optimizer, set_learning_rate, train_step

# name: (boundary method, policy learning-rate multiplier or None for the preset's)
METHODS = {"rl": ("rl", None), "rl-fixed-rate": ("rl", 0.0), "uniform": ("uniform", None), "flat": ("flat", None)}


def round_ratio(run: dict, reference: dict) -> float:
    """Median over rounds of the step-time ratio measured within each round."""
    return statistics.median(a / b for a, b in zip(run["seconds"], reference["seconds"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds; the median round ratio counts")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per method per round")
    parser.add_argument("--out", default="benchmarks/results/train_throughput.json")
    args = parser.parse_args()

    device = default_device()
    corpus = embedded_corpus()
    runs = {}
    for name, (method, policy_lr_mult) in METHODS.items():
        cfg = preset(args.preset)
        cfg.boundaries.method = method
        if policy_lr_mult is not None:
            cfg.boundaries.policy_lr_mult = policy_lr_mult
        torch.manual_seed(0)
        model = build_model(cfg).to(device).train()
        optimizer = make_optimizer(model, cfg)
        set_learning_rate(optimizer, cfg)  # the trainer's rates, the policy head's multiplier included
        runs[name] = {
            "cfg": cfg, "model": model, "optimizer": optimizer,
            "stream": TrainStream(corpus.train, cfg.train.seq_len, cfg.train.batch_size, seed=0),
            "seconds": [], "rates": [],
        }

    def steps(run, n):
        for _ in range(n):
            inputs, targets = (x.to(device) for x in run["stream"].next_batch())
            parts = train_step(run["model"], run["optimizer"], inputs, targets, run["cfg"])[1]
            run["rates"].append(float(parts.get("boundary_rate", 1.0)))
        if device.type == "cuda":
            torch.cuda.synchronize()

    for run in runs.values():  # warm-up: allocator, kernels, Adam state
        steps(run, 2)
    for r in range(args.rounds):  # interleave so that machine noise hits every method alike
        names = list(METHODS)
        for name in names[r % len(names):] + names[:r % len(names)]:
            run = runs[name]
            start = time.perf_counter()
            steps(run, args.steps)
            run["seconds"].append((time.perf_counter() - start) / args.steps)

    cfg = runs["rl"]["cfg"]
    bytes_per_step = cfg.train.batch_size * cfg.train.seq_len
    results = {}
    for method, run in runs.items():
        step_s = statistics.median(run["seconds"])
        results[method] = {
            "parameters": sum(p.numel() for p in run["model"].parameters()),
            "step_seconds_median": step_s,
            "step_seconds_all": run["seconds"],
            "bytes_per_s": bytes_per_step / step_s,
            "boundary_rate_mean": statistics.mean(run["rates"]),
        }
    report = {
        "benchmark": "train_throughput",
        "preset": args.preset,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "bytes_per_step": bytes_per_step,
        "rounds": args.rounds,
        "steps_per_round": args.steps,
        "methods": results,
        "rl_over_uniform_step_time": round_ratio(runs["rl"], runs["uniform"]),
        "rl_fixed_rate_over_uniform_step_time": round_ratio(runs["rl-fixed-rate"], runs["uniform"]),
        "flat_over_uniform_step_time": round_ratio(runs["flat"], runs["uniform"]),
        "target_rl_fixed_rate_over_uniform": 1.05,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "methods"} |
                     {m: round(r["bytes_per_s"]) for m, r in results.items()}, indent=2))


if __name__ == "__main__":
    main()
