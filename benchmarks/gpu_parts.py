"""The parts of the GPU benchmark, each run by benchmarks/gpu.py in a process of its own, so that a
crash, a sticky CUDA error or a hang costs one row. Each writes its result as JSON to `--result`.

    python benchmarks/gpu_parts.py kernels --device cuda --result FILE
    python benchmarks/gpu_parts.py step --preset paper-40m --method rl --rows 32 --steps 10 --result FILE
    python benchmarks/gpu_parts.py curve --preset paper-40m --method rl --steps 200 --run-dir DIR --result FILE

- kernels: FlexAttention forward and backward through the project's own masks (the main network's
  document mask over packed sequences that cross block edges, the byte layers' sliding window), in
  bf16 and fp32, against attention computed sequence by sequence in fp32; the largest differences of
  the output and of the q/k/v gradients, and whether each is within 4x what bf16 (or fp32) SDPA
  itself is off by (plus 1e-3 of the scale). The CPU has no FlexAttention backward: there the forward alone is compared.
- step: median time of training steps of one preset and method (after warm-up steps, whose seconds,
  compiles included, are reported apart): bytes/s, model-FLOPs utilisation, peak memory.
- curve: one preset and method trained for a fixed number of steps (a warm-up that fits them), its
  validation bits per byte and boundary statistics in the run directory's metrics.jsonl.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import platform
import resource
import statistics
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F
from gpu import write_json  # this folder is the script's, so on the path
from torch._dynamo.utils import counters

from rltok.config import preset, set_setting
from rltok.data import TrainStream, eval_batches, load_corpus
from rltok.flops import flops_per_byte, peak_flops
from rltok.layers.blocks import flex_attention_everywhere, local_attention, packed_attention
from rltok.layers.packing import Packing
from rltok.pretrained import build_model
from rltok.step import make_optimizer, set_learning_rate, train_step
from rltok.train import train


def peak_memory(device: torch.device) -> int:
    """Peak bytes allocated on the GPU, or this process's peak resident memory."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class DynamoMessages(logging.Handler):
    """Keeps the messages of dynamo's `recompiles` and `graph_breaks` log artifacts."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage()[:1000])


MESSAGES = DynamoMessages()


def dynamo_counts() -> dict:
    """Compiles, graph breaks and recompile-limit hits since dynamo's counters were cleared, with the
    first 20 kept messages."""
    return {
        "compiles": counters["frames"]["ok"],
        "graph_breaks": sum(counters["graph_break"].values()),
        "recompile_limit_hits": sum(
            n for reason, n in counters["unimplemented"].items() if "recompile" in reason.lower()
        ),
        "messages": MESSAGES.messages[:20],
    }


# ---- kernels -------------------------------------------------------------------------------------

DOCUMENTS = [700, 1, 129, 256, 300, 77, 128]  # sequences that end inside, on and across block edges
HEADS, HEAD_DIM, WINDOW = 4, 64, 64


def causal_reference(q, k, v, lengths: list[int]):
    """Causal attention within each consecutive sequence of q/k/v (H, rows, D), one SDPA each."""
    out, start = torch.zeros_like(q), 0
    for n in lengths:
        s = slice(start, start + n)
        out[:, s] = F.scaled_dot_product_attention(q[:, s], k[:, s], v[:, s], is_causal=True)
        start += n
    return out


def sliding_reference(q, k, v, window: int = WINDOW):
    """Causal attention over the last `window` positions through a dense mask."""
    i = torch.arange(q.size(-2), device=q.device)
    visible = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=visible)


def compare(attend, reference, shape, dtype, device, backward: bool) -> dict:
    """Largest differences of `attend` from `reference` (run in fp32 on the same rounded inputs) in
    the output and q/k/v gradients, beside those of `reference` itself run in `dtype`: a kernel is
    within tolerance when it is off by at most 4x what SDPA in the same dtype is, plus 1e-3 of the
    values' scale (fp32 SDPA is the reference itself; TF32 would stay within that). A wrong mask is
    off by a sizeable share of the scale: a window one byte short, by 14-51%."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    inputs = [torch.randn(shape, generator=generator).to(device, dtype) for _ in range(3)]
    weight = torch.randn(shape, generator=generator).to(device)

    def run(fn, cast):
        leaves = [x.detach().to(cast).requires_grad_(backward) for x in inputs]
        out = fn(*leaves)
        if not backward:
            return [out.detach().float()]
        (out.float() * weight).sum().backward()
        return [out.detach().float()] + [x.grad.float() for x in leaves]

    names = ["out", "dq", "dk", "dv"] if backward else ["out"]
    exact = run(reference, torch.float32)
    same_dtype = run(reference, dtype)
    kernel = run(attend, dtype)
    result = {}
    for name, e, s, k in zip(names, exact, same_dtype, kernel):
        scale = float(e.abs().max())
        error, floor = float((k - e).abs().max()), float((s - e).abs().max())
        result[name] = {
            "max_difference": error,
            "sdpa_same_dtype": floor,
            "scale": scale,
            "within_tolerance": error <= 4 * floor + 1e-3 * scale,
        }
    return result


def kernels(args: argparse.Namespace) -> dict:
    """FlexAttention through the project's document and sliding-window masks against SDPA."""
    device = torch.device(args.device)
    backward = device.type == "cuda"  # PyTorch has no FlexAttention backward on the CPU
    dtypes = [torch.bfloat16, torch.float32] if device.type == "cuda" else [torch.float32]
    valid = torch.arange(max(DOCUMENTS))[None, :] < torch.tensor(DOCUMENTS)[:, None]
    rows, used = Packing.of(valid.to(device)).rows, sum(DOCUMENTS)
    checks = {}
    with flex_attention_everywhere():
        for dtype in dtypes:
            name = str(dtype).removeprefix("torch.")

            def document(q, k, v):  # the outputs of the sequences' rows, not of the padding after
                return packed_attention(q, k, v, Packing.of(valid.to(q.device)))[:, :used]

            checks[f"document_mask_{name}"] = compare(
                document,
                lambda q, k, v: causal_reference(q, k, v, DOCUMENTS)[:, :used],
                (HEADS, rows, HEAD_DIM),
                dtype,
                device,
                backward,
            )
            checks[f"sliding_window_{name}"] = compare(
                lambda q, k, v: local_attention(q, k, v, WINDOW),
                sliding_reference,
                (2, HEADS, 700, HEAD_DIM),
                dtype,
                device,
                backward,
            )
    return {
        "documents": DOCUMENTS,
        "packed_rows": rows,
        "backward": backward or "not run: PyTorch has no FlexAttention backward on the CPU",
        "checks": checks,
        "passed": all(c["within_tolerance"] for check in checks.values() for c in check.values()),
    }


# ---- step ----------------------------------------------------------------------------------------


def configured(args: argparse.Namespace):
    """The preset with the method and its overrides (`--set section.path=value`)."""
    cfg = preset(args.preset)
    cfg.boundaries.method = args.method
    for setting in args.set:
        key, value = setting.split("=", 1)
        section, path = key.split(".", 1)
        set_setting(getattr(cfg, section), path, json.loads(value))
    return cfg.validate()


def step(args: argparse.Namespace) -> dict:
    """Median step time of one preset and method on `rows` rows, after `warmup` steps."""
    device = torch.device(args.device)
    cfg = configured(args)
    cfg.train.batch_size = args.rows or cfg.train.batch_size
    corpus = load_corpus(args.data)
    torch.manual_seed(0)
    model = build_model(cfg).to(device).train()
    optimizer = make_optimizer(model, cfg)
    set_learning_rate(optimizer, cfg)
    stream = TrainStream(corpus.train, cfg.train.seq_len, cfg.train.batch_size, seed=0)
    seconds, rates, warmup = [], [], []
    for i in range(args.warmup + args.steps):
        inputs, targets = (x.to(device, non_blocking=True) for x in stream.next_batch())
        start = time.perf_counter()
        parts = train_step(model, optimizer, inputs, targets, cfg, i)[1]
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i < args.warmup:  # allocator warm-up and any compilation, reported apart
            warmup.append(time.perf_counter() - start)
            compiles_in_warmup = counters["frames"]["ok"]
        else:
            seconds.append(time.perf_counter() - start)
            rates.append(float(parts.get("boundary_rate", 1.0)))
    bytes_per_s = cfg.train.batch_size * cfg.train.seq_len / statistics.median(seconds)
    flops = flops_per_byte(model, statistics.mean(rates), cfg.train.seq_len)
    peak = peak_flops(device)
    return {
        "rows": cfg.train.batch_size,
        "seq_len": cfg.train.seq_len,
        "parameters": sum(p.numel() for p in model.parameters()),
        "step_seconds": seconds,
        "step_seconds_median": statistics.median(seconds),
        "warmup_seconds": warmup,
        "bytes_per_s": bytes_per_s,
        "boundary_rate": statistics.mean(rates),
        "flops_per_byte": flops,
        "mfu": flops * bytes_per_s / peak if peak else None,
        "peak_memory_bytes": peak_memory(device),
        "dynamo": {
            **dynamo_counts(),
            "compiles_after_warmup": counters["frames"]["ok"] - compiles_in_warmup,
        },
    }


# ---- curve ---------------------------------------------------------------------------------------


def whole_batches(docs: list[bytes], seq_len: int, rows: int, want: int) -> int:
    """The most validation bytes up to `want` whose batches of `rows` rows are all full: a last,
    shorter batch would be one more shape to compile. (eval_batches takes the same share of every
    document, rounded up, and cuts it into rows of seq_len.)"""
    total = sum(map(len, docs))
    for max_bytes in range(min(want, total), 0, -max(1, want // 512)):
        share = max_bytes / total
        if sum(-(-math.ceil(len(d) * share) // seq_len) for d in docs) % rows == 0:
            batches = eval_batches(docs, seq_len, rows, max_bytes=max_bytes)
            if all(b.inputs.size(0) == rows for b in batches):
                return max_bytes
    return want


def curve(args: argparse.Namespace) -> dict:
    """Train for `--steps` steps (warm-up a tenth of them, validation about 6 times); the curve itself
    is read from the run directory's metrics.jsonl by the caller, so it survives an interruption."""
    device = torch.device(args.device)
    cfg = configured(args)
    t = cfg.train
    t.seed = 0
    t.max_steps = args.steps
    t.warmup_steps = max(1, args.steps // 10)
    t.eval_every = max(1, args.steps // 6)
    t.log_every = max(1, min(t.log_every, args.steps // 20))
    t.checkpoint_every = args.steps  # the last one only
    if args.rows and t.batch_size > args.rows:  # the preset's batch, as micro-batches of `rows`
        t.grad_accum = t.batch_size // args.rows
    corpus = load_corpus(args.data)
    t.eval_bytes = whole_batches(corpus.val, t.seq_len, t.batch_size // t.grad_accum, t.eval_bytes)
    summary = train(cfg, corpus, args.run_dir, device=device, progress=False, compile=args.compile)
    return {
        "summary": summary,
        "warmup_steps": t.warmup_steps,
        "grad_accum": t.grad_accum,
        "eval_bytes": t.eval_bytes,
        "peak_memory_bytes": peak_memory(device),
        "dynamo": dynamo_counts(),
    }


# ---- the command ---------------------------------------------------------------------------------

PARTS = {"kernels": kernels, "step": step, "curve": curve}


def describe(device: torch.device) -> dict:
    """The machine and library versions a result was measured with."""
    triton = None
    with contextlib.suppress(ImportError):
        import triton as triton_module

        triton = triton_module.__version__
    return {
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or "cpu",
        "torch": torch.__version__,
        "triton": triton,
        "cuda": torch.version.cuda,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=PARTS)
    parser.add_argument("--result", required=True, type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--preset", default="paper-40m")
    parser.add_argument("--method", default="rl")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=JSON")
    parser.add_argument(
        "--rows", type=int, default=0, help="rows per micro-batch (0: the preset's)"
    )
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--data")
    parser.add_argument("--run-dir")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--flex-everywhere", action="store_true")
    args = parser.parse_args()
    torch._logging.set_logs(recompiles=True, graph_breaks=True)
    logging.getLogger("torch._dynamo").addHandler(MESSAGES)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    try:
        with flex_attention_everywhere() if args.flex_everywhere else contextlib.nullcontext():
            result = PARTS[args.part](args)
    except Exception as e:  # the error is this part's result; the caller goes on with the next
        traceback.print_exc()
        lines = str(e).strip().splitlines()
        result = {"error": f"{type(e).__name__}: {lines[0] if lines else ''}"[:500]}
        if isinstance(e, torch.cuda.OutOfMemoryError):
            result["error"] = "out of memory: lower --rows"
    result["seconds"] = round(time.perf_counter() - started, 2)
    write_json(args.result, {**describe(device), **result})


if __name__ == "__main__":
    main()
