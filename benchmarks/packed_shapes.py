"""What a chunk count that changes every step costs the main network on the CPU, with the packed rows
padded to a bucket (as the model does) and without, written as JSON
(benchmarks/results/packed_shapes.json).

A learned boundary method hands the main network a new number of chunks at almost every step, where
a fixed stride hands it the same number every time. Each configuration here runs the CPU preset's
main network (4 blocks, d 192) forward and backward on 16 rows of about 103 chunks, in its own process
at one thread, beside its partner in a second process: a fixed count (103 per row) beside a fresh
count (80-130 per row, drawn each step), so that the machine's drift hits both. `exact` packs exactly
the valid rows, `bucketed` pads them to `Packing.rows` as the model does. Each process reports its
mean step after a warm-up and its peak resident memory.

    python benchmarks/packed_shapes.py [--steps 120] [--precisions bf16,fp32] [--out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from rltok.config import preset
from rltok.layers.blocks import Stack
from rltok.layers.packing import Packing

ROOT = Path(__file__).resolve().parents[1]
ROWS, CHUNKS, WARM_UP = 16, 103, 20


def child(count: str, packing_kind: str, precision: str, steps: int) -> dict:
    """Time the main network on `steps` batches of chunks; `count` is fixed or fresh."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    draw = random.Random(0)
    m = preset("tiny").model
    main = Stack(m.n_main, m.d_model, m.n_heads, m.main_mlp_mult, None, m.rope_base)
    width = 140
    seconds = []
    for _ in range(steps):
        sizes = (
            [CHUNKS] * ROWS if count == "fixed" else [draw.randint(80, 130) for _ in range(ROWS)]
        )
        packing = Packing.of(torch.arange(width) < torch.tensor(sizes)[:, None], sizes, 512)
        if packing_kind == "exact":
            packing = dataclasses.replace(packing, rows=sum(sizes))
        x = torch.randn(ROWS, width, m.d_model, requires_grad=True)
        positions = torch.arange(width).expand(ROWS, width) * 5
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            y = main(x, positions, packing)
        y.float().square().mean().backward()
        seconds.append(time.perf_counter() - start)
    return {
        "ms_per_step": 1e3 * sum(seconds[WARM_UP:]) / len(seconds[WARM_UP:]),
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def pair(packing_kind: str, precision: str, steps: int) -> dict:
    """A fixed-count and a fresh-count process at once; each one's result."""
    procs = {
        count: subprocess.Popen(
            [sys.executable, __file__, "--child", count, packing_kind, precision, str(steps)],
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )
        for count in ("fixed", "fresh")
    }
    results = {}
    for count, proc in procs.items():
        out, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"the {count} {packing_kind} {precision} process failed")
        results[count] = json.loads(out)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--precisions", default="bf16,fp32")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/packed_shapes.json"))
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        count, packing_kind, precision, steps = args.child
        print(json.dumps(child(count, packing_kind, precision, int(steps))))
        return
    report = {
        "benchmark": "packed_shapes",
        "date": time.strftime("%Y-%m-%d"),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "steps": args.steps,
        "warm_up": WARM_UP,
    }
    for precision in args.precisions.split(","):
        for packing_kind in ("exact", "bucketed"):
            ran = pair(packing_kind, precision, args.steps)
            key = f"{precision}_{packing_kind}"
            report[key] = ran | {
                "fresh_over_fixed": ran["fresh"]["ms_per_step"] / ran["fixed"]["ms_per_step"]
            }
            print(key, json.dumps(report[key]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
