"""The scaling-up targets on CPU, measured in one run and written as JSON (ratios within one run, since
the machine's speed drifts):

1. policy overhead: an RL step against a uniform-boundary step at sequence lengths 512, 1024 and 4096
   (the same bytes per step); `rl-fixed-rate` freezes the policy head so that its chunk count matches
   uniform's (as in train_throughput.py), `rl` lets it learn. Target: rl-fixed-rate <= 1.05x.
2. U-Net against the flat byte transformer of about equal parameters at 4096: bytes/s ratio, target >= 2.
3. sliding-window attention: peak resident memory (VmHWM) of one encoder layer's forward and backward
   at L = 1024 ... 8192, each in a fresh process, for the blocked path and for a dense (T, T) mask;
   growth from 1024 to 8192 (linear: 8x, quadratic: 64x, on top of a fixed cost).
4. data loading from memory-mapped shards: loader time per step as a share of the step time, target < 2%.
5. two gloo processes (torchrun) against one process with both threads: bytes/s ratio, reported.

    python benchmarks/scaling.py [--rounds 5] [--only NAME ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from rltok.config import preset, set_setting
from rltok.data import TrainStream, embedded_corpus
from rltok.pretrained import build_model
from rltok.step import make_optimizer, set_learning_rate, train_step

BYTES_PER_STEP = 8192
STEP_METHODS = {
    "rl": {"method": "rl"},
    "rl-fixed-rate": {"method": "rl", "policy.lr_mult": 0.0},
    "uniform": {"method": "uniform"},
    "flat": {"method": "flat"},
}


def timed_steps(
    methods: list[str], seq_len: int, rounds: int, reference: str = "uniform", steps: int = 1
) -> dict:
    """Median seconds per step of each method (tiny architecture, K = 1), interleaved round by round,
    and the median within-round step-time ratio of each against `reference`."""
    corpus = embedded_corpus()
    runs = {}
    for name in methods:
        cfg = preset("tiny")
        cfg.train.seq_len, cfg.train.batch_size = seq_len, max(1, BYTES_PER_STEP // seq_len)
        cfg.boundaries.group.size = 1
        for path, value in STEP_METHODS[name].items():
            set_setting(cfg.boundaries, path, value)
        torch.manual_seed(0)
        model = build_model(cfg).train()
        optimizer = make_optimizer(model, cfg)
        set_learning_rate(optimizer, cfg)
        runs[name] = {
            "cfg": cfg,
            "model": model,
            "optimizer": optimizer,
            "seconds": [],
            "rates": [],
            "stream": TrainStream(corpus.train, seq_len, cfg.train.batch_size, seed=0),
        }

    def run_steps(run, n):
        for step in range(n):
            parts = train_step(
                run["model"], run["optimizer"], *run["stream"].next_batch(), run["cfg"], step
            )[1]
            run["rates"].append(float(parts.get("boundary_rate", 1.0)))

    for run in runs.values():
        run_steps(run, 2)  # warm-up
    for r in range(rounds):
        order = methods[r % len(methods) :] + methods[: r % len(methods)]
        for name in order:
            start = time.perf_counter()
            run_steps(runs[name], steps)
            runs[name]["seconds"].append((time.perf_counter() - start) / steps)
    out = {}
    for name, run in runs.items():
        out[name] = {
            "step_seconds_median": statistics.median(run["seconds"]),
            "bytes_per_s": BYTES_PER_STEP / statistics.median(run["seconds"]),
            "boundary_rate_mean": statistics.mean(run["rates"]),
            "parameters": sum(p.numel() for p in run["model"].parameters()),
        }
        if name != reference and reference in runs:
            ratios = [a / b for a, b in zip(run["seconds"], runs[reference]["seconds"])]
            out[name][f"over_{reference}_step_time"] = statistics.median(ratios)
            if len(ratios) >= 4:  # the rounds' spread: this machine's speed drifts
                out[name][f"over_{reference}_quartiles"] = statistics.quantiles(ratios, n=4)[::2]
    return out


def policy_overhead(rounds: int) -> dict:
    per_length = {
        L: timed_steps(["rl", "rl-fixed-rate", "uniform"], L, rounds) for L in (512, 1024, 4096)
    }
    ratios = {L: r["rl-fixed-rate"]["over_uniform_step_time"] for L, r in per_length.items()}
    return {
        "by_seq_len": per_length,
        "rl_fixed_rate_over_uniform": ratios,
        "target": 1.05,
        "met": all(v <= 1.05 for v in ratios.values()),
    }


def unet_over_flat(rounds: int) -> dict:
    r = timed_steps(["rl-fixed-rate", "flat"], 4096, rounds, reference="flat")
    ratio = 1 / r["rl-fixed-rate"]["over_flat_step_time"]  # bytes per step are equal
    return {
        "seq_len": 4096,
        "methods": r,
        "unet_over_flat_bytes_per_s": ratio,
        "target": 2.0,
        "met": ratio >= 2.0,
    }


LAYER_PROBE = """
import sys, torch
import rltok.layers.blocks as blocks
L, dense = int(sys.argv[1]), sys.argv[2] == "dense"
if dense:  # the quadratic reference: SDPA under a (T, T) sliding-window mask
    def dense_attention(q, k, v, window):
        i = torch.arange(q.size(2))
        mask = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    blocks.local_attention = dense_attention
torch.manual_seed(0)
stack = blocks.Stack(1, 192, 3, 1, 64, 10000.0)
def run(length):
    x = torch.randn(2, length, 192, requires_grad=True)
    stack(x, torch.arange(length).expand(2, length)).square().mean().backward()
def status(field):  # kB; VmHWM is this process's own peak (ru_maxrss would carry the parent's over exec)
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field))
run(256)  # libraries and kernels loaded: what is left is the layer's own memory
base = status("VmRSS:")
run(L)
print((status("VmHWM:") - base) * 1024)
"""


def attention_memory() -> dict:
    lengths = (1024, 2048, 4096, 8192)
    result = {}
    for path in ("blocked", "dense"):
        peaks = {}
        for L in lengths:
            out = subprocess.run(
                [sys.executable, "-c", LAYER_PROBE, str(L), path],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
            peaks[L] = int(out.stdout.strip().splitlines()[-1])
        result[path] = {
            "peak_bytes_over_baseline": peaks,
            "growth_1024_to_8192": peaks[8192] / max(peaks[1024], 1),
        }
    result["target"] = "blocked growth near 8x (linear), far from 64x (quadratic)"
    result["met"] = result["blocked"]["growth_1024_to_8192"] < 16
    return result


def loader_share(rounds: int) -> dict:
    from rltok.data.shards import load_sharded, shard_source, write_shards

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "shards"
        source = Path(tmp) / "docs.jsonl"
        with source.open("w") as f:
            for doc in embedded_corpus().train:
                text = doc.decode("utf-8", "replace")
                for i in range(0, len(text), 8000):
                    f.write(json.dumps({"text": text[i : i + 8000]}) + "\n")
        write_shards(shard_source(str(source)), folder, str(source), shard_bytes=1 << 20)
        corpus = load_sharded(folder)
        cfg = preset("tiny")
        stream = TrainStream(corpus.train, cfg.train.seq_len, cfg.train.batch_size, seed=0)
        loads = []
        for _ in range(200):
            start = time.perf_counter()
            stream.next_batch()
            loads.append(time.perf_counter() - start)
        step = timed_steps(["rl"], cfg.train.seq_len, rounds)["rl"]["step_seconds_median"]
        shards = len(corpus.train.packed())
    load = statistics.median(loads)
    return {
        "shards": shards,
        "batch": [cfg.train.batch_size, cfg.train.seq_len],
        "load_seconds_median": load,
        "step_seconds_median": step,
        "share": load / step,
        "target": 0.02,
        "met": load / step < 0.02,
    }


def gloo_ratio(steps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        common = [
            "train",
            "--preset",
            "tiny",
            "--max-steps",
            str(steps),
            "--quiet",
            "--eval-every",
            "1000000",
        ]
        one = subprocess.run(
            [sys.executable, "-m", "rltok", *common, "--out", f"{tmp}/one"],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "OMP_NUM_THREADS": "2"},
        )
        two = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc-per-node",
                "2",
                "-m",
                "rltok",
                *common,
                "--out",
                f"{tmp}/two",
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
    speed = {
        name: json.loads(proc.stdout.strip().splitlines()[-1])["bytes_per_s"]
        for name, proc in (("one_process_2_threads", one), ("two_gloo_processes_1_thread", two))
    }
    return {
        "steps": steps,
        "bytes_per_s": speed,
        "ratio": speed["two_gloo_processes_1_thread"] / speed["one_process_2_threads"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of timed steps")
    parser.add_argument("--gloo-steps", type=int, default=30)
    parser.add_argument("--only", nargs="+", choices=["policy", "flat", "memory", "loader", "gloo"])
    parser.add_argument("--out", default="benchmarks/results/scaling.json")
    args = parser.parse_args()
    parts = {
        "policy": lambda: policy_overhead(args.rounds),
        "flat": lambda: unet_over_flat(args.rounds),
        "memory": attention_memory,
        "loader": lambda: loader_share(args.rounds),
        "gloo": lambda: gloo_ratio(args.gloo_steps),
    }
    report = {
        "benchmark": "scaling",
        "date": time.strftime("%Y-%m-%d"),
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    if args.only and Path(args.out).exists():  # rerun some parts, keep the others
        report = {**json.loads(Path(args.out).read_text()), **report}
    for name in args.only or parts:
        print(f"scaling: {name} ...", file=sys.stderr, flush=True)
        report[name] = parts[name]()
        print(
            json.dumps(
                {
                    name: {
                        k: v for k, v in report[name].items() if k not in ("by_seq_len", "methods")
                    }
                },
                default=str,
            ),
            flush=True,
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
