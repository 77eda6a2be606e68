"""Training throughput of RL boundaries against uniform boundaries (the policy's overhead) and a flat
byte transformer of about the same size, measured in one run, interleaved, and written as JSON.
The VM's speed can halve within a minute, so ratios are taken within each round (the methods'
steps run back to back, in an order that rotates) and the median round ratio is reported.

An RL policy that learns moves its rate (it starts away from the target: the prior lifts the mean
probability to about 0.29, and an untrained mode ends no chunks), and the main network's work follows
the number of chunks. So every method first trains `--settle` steps on the trainer's schedule, and
then its timed steps run at learning rate 0: the whole step runs (sampling, returns, every loss and its
gradient, the optimizer's update) while the weights, and so the rate, stay where they settled. The
JSON gives each method's mean rate over the timed steps beside its step time, so a ratio is read at
the rates it was measured at. `rl-fixed-rate` keeps the policy head's multiplier at 0 while settling.

`rl-group` is the group estimator with the preset's settings, grouping every step: B distinct texts,
some of them segmented K - 1 more times (main network and decoder without gradient), and
`rl-group-all-texts` the same with every text grouped. `rl-same-rows`
is the paper's estimator (K = 1) on as many rows as that step runs through the main network, the
comparison the group estimator's cost target is stated against.

    python benchmarks/train_throughput.py [--preset tiny] [--rounds 12] [--steps 2] [--settle 40] [--out FILE]
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
from rltok.pretrained import build_model
from rltok.recipes import recipe
from rltok.runtime import default_device
from rltok.step import lr_factor, make_optimizer, set_learning_rate, train_step

K1 = {"group.size": 1}
# name: a learner recipe (or none) and boundary settings by dotted path on top; "same_rows" sets the
# batch to the rows of a grouped step
METHODS = {
    "rl": ("", {"method": "rl", **K1}),
    "rl-fixed-rate": ("", {"method": "rl", "policy.lr_mult": 0.0, **K1}),
    # the default recipe, grouping at every step (its most expensive steps: while the policy is unsure)
    "rl-group": ("group-prior", {"group.entropy": 0.0}),
    "rl-same-rows": ("", {"method": "rl", **K1, "same_rows": True}),
    "rl-group-all-texts": ("group-prior", {"group.entropy": 0.0, "group.texts": 0}),
    # a head that reads the last 3 bytes, taught by the prior, the language model on its mode and the
    # rollouts at every step; with `group.lm` the language model also learns from the rollouts
    "rl-byte-head": ("byte-head", {"group.entropy": 0.0}),
    "rl-byte-head-group-lm": ("byte-head-group-lm", {}),
    "uniform": ("", {"method": "uniform", **K1}),
    "flat": ("", {"method": "flat", **K1}),
}


def round_ratio(run: dict, reference: dict) -> float:
    """Median over rounds of the step-time ratio measured within each round."""
    return statistics.median(a / b for a, b in zip(run["seconds"], reference["seconds"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument(
        "--rounds", type=int, default=12, help="interleaved rounds; the median round ratio counts"
    )
    parser.add_argument("--steps", type=int, default=2, help="timed steps per method per round")
    parser.add_argument(
        "--settle", type=int, default=40, help="training steps before the timed ones (rates settle)"
    )
    parser.add_argument("--out", default="benchmarks/results/train_throughput.json")
    args = parser.parse_args()

    device = default_device()
    corpus = embedded_corpus()
    runs = {}
    for name, (recipe_name, fields) in METHODS.items():
        cfg = preset(args.preset)
        if recipe_name:
            recipe(recipe_name).apply(cfg)
        group = cfg.boundaries.group
        if fields.get("same_rows"):
            grouped = min(group.texts or cfg.train.batch_size, cfg.train.batch_size)
            cfg.train.batch_size += grouped * (group.size - 1)
        for path, value in fields.items():
            if path != "same_rows":
                set_setting(cfg.boundaries, path, value)
        torch.manual_seed(0)
        model = build_model(cfg).to(device).train()
        optimizer = make_optimizer(model, cfg)
        set_learning_rate(optimizer, cfg)
        runs[name] = {
            "cfg": cfg,
            "model": model,
            "optimizer": optimizer,
            "stream": TrainStream(corpus.train, cfg.train.seq_len, cfg.train.batch_size, seed=0),
            "seconds": [],
            "rates": [],
        }

    def steps(run, n):
        for _ in range(n):
            inputs, targets = (x.to(device) for x in run["stream"].next_batch())
            # grouped throughout
            parts = train_step(run["model"], run["optimizer"], inputs, targets, run["cfg"])[1]
            run["rates"].append(float(parts.get("boundary_rate", 1.0)))
        if device.type == "cuda":
            torch.cuda.synchronize()

    # settle: the trainer's schedule (its warm-up included) for --settle steps, so that every learned
    # rate has left its initial value (the prior's 0.29, the untrained mode's 0) for the target; then
    # learning rate 0, so that the rates stay where they settled while the steps are timed (a
    # step's work does not depend on the learning rate)
    for run in runs.values():
        for step in range(args.settle):
            factor = lr_factor(step, step / run["cfg"].train.max_steps, run["cfg"])
            set_learning_rate(run["optimizer"], run["cfg"], factor)
            steps(run, 1)
        set_learning_rate(run["optimizer"], run["cfg"], 0.0)
        run["rates"].clear()
    for r in range(args.rounds):  # interleave so that machine noise hits every method alike
        names = list(METHODS)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            run = runs[name]
            start = time.perf_counter()
            steps(run, args.steps)
            run["seconds"].append((time.perf_counter() - start) / args.steps)

    cfg = runs["rl-group"]["cfg"]
    results = {}
    for method, run in runs.items():
        step_s = statistics.median(run["seconds"])
        t = run["cfg"].train
        results[method] = {
            "parameters": sum(p.numel() for p in run["model"].parameters()),
            "batch_size": t.batch_size,
            "step_seconds_median": step_s,
            "step_seconds_all": run["seconds"],
            "bytes_per_s": t.batch_size * t.seq_len / step_s,  # distinct training bytes
            "boundary_rate_mean": statistics.mean(run["rates"]),
        }
    report = {
        "benchmark": "train_throughput",
        "preset": args.preset,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "group": {
            "group_size": cfg.boundaries.group.size,
            "group_texts": cfg.boundaries.group.texts,
        },
        "rounds": args.rounds,
        "steps_per_round": args.steps,
        "methods": results,
        "rl_over_uniform_step_time": round_ratio(runs["rl"], runs["uniform"]),
        "rl_fixed_rate_over_uniform_step_time": round_ratio(runs["rl-fixed-rate"], runs["uniform"]),
        "flat_over_uniform_step_time": round_ratio(runs["flat"], runs["uniform"]),
        # the default recipe (group-prior) while it groups: its dearest steps
        "rl_group_over_uniform_step_time": round_ratio(runs["rl-group"], runs["uniform"]),
        "rl_group_over_rl_step_time": round_ratio(runs["rl-group"], runs["rl"]),
        "rl_group_over_rl_same_rows_step_time": round_ratio(runs["rl-group"], runs["rl-same-rows"]),
        "rl_group_all_texts_over_rl_step_time": round_ratio(runs["rl-group-all-texts"], runs["rl"]),
        "rl_byte_head_over_uniform_step_time": round_ratio(runs["rl-byte-head"], runs["uniform"]),
        "rl_byte_head_group_lm_over_uniform_step_time": round_ratio(
            runs["rl-byte-head-group-lm"], runs["uniform"]
        ),
        "target_rl_fixed_rate_over_uniform": 1.05,
        "target_rl_group_over_rl_same_rows": 1.0,
        "target_default_recipe_over_uniform": 1.1,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(
        json.dumps(
            {k: v for k, v in report.items() if k != "methods"}
            | {m: round(r["bytes_per_s"]) for m, r in results.items()},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
