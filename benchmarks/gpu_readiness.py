"""What can be checked of the CUDA path without a GPU, as one JSON (benchmarks/results/gpu_readiness.json):

- host syncs per training micro-batch (forward with the group estimator's rollouts, backward) for each
  U-Net method, counted by rltok.syncs on the `smoke` and `tiny` architectures;
- the main network's FlexAttention document mask at the chunk counts of 32, 128, 512 and 2048 rows
  of 4096 bytes at rate 0.2 (about 26k, 105k, 420k and 1.7M chunks): its tensors' bytes, every byte
  its build allocated (a bound on the build's peak memory) and its build time, in a fresh process
  each, beside the bytes of a dense N x N mask;
- the FlexAttention path, compiled and run on the CPU, against the CPU path: the largest difference in
  logits for rl, hnet and uniform (forward only; PyTorch has no FlexAttention backward on the CPU);
- compiles of FlexAttention over 50 forward passes of an RL model whose chunk count changes every pass
  (the rate its logits are centred on drifting from 0.01 to 0.95): one per bucket of packed rows and per byte-layer shape,
  none past that, and no fall-back to the unfused path that materialises every score;
- `benchmarks/gpu.sh` on a machine without CUDA: its exit code, its one sentence and its seconds.

    python benchmarks/gpu_readiness.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from rltok.config import LossWeights, preset
from rltok.layers import blocks
from rltok.objective import run_model, training_loss
from rltok.pretrained import build_model
from rltok.syncs import HostSyncs

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("rl", "hnet", "nawrot", "uniform")


def model_of(name: str, method: str) -> torch.nn.Module:
    """A fresh model whose boundaries depend on content (the RL head randomised, as in the tests)."""
    cfg = preset(name)
    cfg.boundaries.method = method
    torch.manual_seed(0)
    model = build_model(cfg.validate())
    if method == "rl":
        torch.nn.init.normal_(model.boundary.head.weight, std=0.5)
    return model


def host_syncs(name: str, method: str) -> int:
    """Host syncs of one training micro-batch of 4 rows of 256 bytes, rollouts included for rl."""
    model = model_of(name, method).train()
    ids = torch.randint(0, 256, (4, 256))
    targets, valid = torch.roll(ids, -1, 1), torch.ones_like(ids, dtype=torch.bool)
    rollouts = model.boundary.rollouts(4, 4, ids.device)
    with HostSyncs() as syncs:
        out, nll = run_model(model, ids, targets, valid, rollouts=rollouts)
        training_loss(model, out, nll, targets, valid, LossWeights())[0].backward()
    return len(syncs.seen)


MASK = """
import sys, time, torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from rltok.layers.blocks import document_block_mask, padded_rows

class Allocations(TorchDispatchMode):
    # the bytes of every storage an op creates (not views of its inputs): their sum bounds the
    # peak from above, whatever is freed when
    def __init__(self):
        super().__init__()
        self.bytes = 0
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        seen = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs))
                if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                seen.add(t.untyped_storage().data_ptr())
                self.bytes += t.untyped_storage().nbytes()
        return out

rows, length = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
lengths = torch.randint(int(0.15 * length), int(0.25 * length), (rows,))  # chunks per row, rate ~0.2
n = int(lengths.sum())
start = time.perf_counter()
mask = document_block_mask(lengths, padded_rows(n), length)
seconds = time.perf_counter() - start
with Allocations() as made:
    document_block_mask(lengths, padded_rows(n), length)
storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
            for t in vars(mask).values() if isinstance(t, torch.Tensor)}
print(n, padded_rows(n), sum(storages.values()), seconds, made.bytes)
"""


def mask_memory(rows: int, length: int = 4096) -> dict:
    """The document mask for `rows` rows of `length` bytes at rate about 0.2, built in a fresh
    process: its tensors' storage, and every byte the build allocated (a bound on its peak)."""
    out = subprocess.run(
        [sys.executable, "-c", MASK, str(rows), str(length)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    n, padded, tensor_bytes, seconds, allocated = out.stdout.split()
    return {
        "rows": rows,
        "chunks": int(n),
        "padded_chunks": int(padded),
        "mask_tensor_bytes": int(tensor_bytes),
        "build_allocated_bytes": int(allocated),
        "build_seconds": round(float(seconds), 3),
        "dense_mask_bytes": int(padded) ** 2,  # one bool per (query, key): what a dense build holds
    }


def flex_against_cpu(method: str) -> float:
    """Largest |logit difference| of the FlexAttention path and the CPU path, smoke architecture,
    the group estimator's extra segmentations included for rl."""
    model = model_of("smoke", method).eval()
    ids, noise = torch.randint(0, 256, (3, 150)), torch.rand(5, 150)
    # rl segments two of the texts once more, as the group estimator does
    rollouts = torch.tensor([0, 2]) if method == "rl" else None
    rows = 3 if rollouts is None else 5

    def outputs() -> torch.Tensor:
        out = model(ids, noise=noise[:rows], rollouts=rollouts)
        return out.logits if rollouts is None else torch.cat([out.logits, out.rollout_logits])

    with torch.no_grad():
        expected = outputs()
        with blocks.flex_attention_everywhere():
            got = outputs()
    return float((got - expected).abs().max())


def flex_recompiles(steps: int = 50) -> dict:
    """Compiles of FlexAttention while an RL model's chunk count changes at every forward pass."""
    from torch._dynamo.utils import counters

    model = model_of("smoke", "rl").eval()
    torch._dynamo.reset()
    counters.clear()
    chunks, seconds = [], []
    with torch.no_grad(), blocks.flex_attention_everywhere():
        for step in range(steps):
            # a drifting policy: the rate the logits are centred on moves from 0.01 to 0.95
            model.boundary.schedule.target = 0.01 + 0.94 * step / (steps - 1)
            ids = torch.randint(0, 256, (8, 512), generator=torch.Generator().manual_seed(step))
            start = time.perf_counter()
            out = model(
                ids, noise=torch.rand(8, 512, generator=torch.Generator().manual_seed(step))
            )
            seconds.append(time.perf_counter() - start)
            chunks.append(int(out.boundaries.sum()))
    buckets = {blocks.padded_rows(n) for n in chunks}
    compiles = counters["frames"]["ok"]
    shapes = len(buckets) + 1  # each bucket, and the byte layers' one length
    fallbacks = sum(n for reason, n in counters["unimplemented"].items() if "recompile" in reason)
    return {
        "passes": steps,
        "chunk_counts": f"{min(chunks)}-{max(chunks)}, {len(set(chunks))} distinct",
        "buckets_met": len(buckets),
        "compiles": compiles,
        "compiles_beyond_one_per_shape": compiles - shapes,
        "fallbacks_to_the_unfused_path": fallbacks,
        "last_10_passes_seconds": round(sum(seconds[-10:]), 3),
    }


def gpu_sh_without_cuda() -> dict:
    """Run benchmarks/gpu.sh where there is no CUDA: it should stop at once with one sentence."""
    start = time.perf_counter()
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu.sh")], capture_output=True, text=True, timeout=300
    )
    said = [line for line in done.stderr.splitlines() if line.startswith("gpu.sh:")]
    return {
        "exit_code": done.returncode,
        "seconds": round(time.perf_counter() - start, 2),
        "said": said,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/gpu_readiness.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    report = {
        "benchmark": "gpu_readiness",
        "date": time.strftime("%Y-%m-%d"),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "host_syncs_per_micro_batch": {
            name: {method: host_syncs(name, method) for method in METHODS}
            for name in ("smoke", "tiny")
        },
        "document_mask": [mask_memory(rows) for rows in (32, 128, 512, 2048)],
        "flex_minus_cpu_max_abs_logit": {m: flex_against_cpu(m) for m in METHODS},
        "flex_recompiles": flex_recompiles(),
        "not_measured_here": {
            "recompiles_in_training": "needs CUDA: on the CPU FlexAttention has no backward, so no "
            "training step runs through it; forward passes (flex_recompiles) compile the same shapes",
        },
    }
    if not torch.cuda.is_available():
        report["gpu_sh_without_cuda"] = gpu_sh_without_cuda()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak resident memory of this process: {peak / 1024:.0f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()
