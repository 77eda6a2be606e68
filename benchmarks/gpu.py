"""The GPU benchmark, one JSON, sized for at most 8 minutes on one H200 (run it through benchmarks/gpu.sh):

1. timing: training steps of paper-40m and paper-147m with rl and uniform boundaries (bf16 autocast,
   `--rows` rows of 4096 bytes per step): bytes/s, model-FLOPs utilisation and peak memory;
2. training: paper-40m with rl for the rest of the time (the learning-rate schedule ends on time), with
   validation bits per byte, whitespace and word-start recall and the rate against bytes seen.

Each timed configuration also reports dynamo's compiles (during warm-up and after it), graph breaks
and recompile-limit hits, with the messages of the TORCH_LOGS artifacts `recompiles` and
`graph_breaks`; the training phase reports the same over the whole run.

`--device cpu --smoke` runs the same script in seconds on the smoke preset: the check that it works;
`--flex-everywhere` takes the CUDA attention path (FlexAttention) on any device.

    python benchmarks/gpu.py [--minutes 8] [--rows 32] [--data PATH] [--compile] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch._dynamo.utils import counters

from rltok.config import preset
from rltok.data import TrainStream, load_corpus
from rltok.flops import flops_per_byte, peak_flops
from rltok.layers.blocks import flex_attention_everywhere
from rltok.pretrained import build_model
from rltok.runtime import default_device
from rltok.step import make_optimizer, set_learning_rate, train_step
from rltok.train import train


def peak_memory(device: torch.device) -> int:
    """Peak bytes allocated on the GPU since the last reset, or this process's peak resident memory."""
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


def watch_dynamo() -> None:
    """Turn on the TORCH_LOGS artifacts `recompiles` and `graph_breaks` and keep their messages."""
    torch._logging.set_logs(recompiles=True, graph_breaks=True)
    logging.getLogger("torch._dynamo").addHandler(MESSAGES)


def dynamo_counts(since: int = 0) -> dict:
    """Compiles, graph breaks and recompile-limit hits since dynamo's counters were cleared, and the
    kept messages from index `since` on (the first 20)."""
    return {
        "compiles": counters["frames"]["ok"],
        "graph_breaks": sum(counters["graph_break"].values()),
        "recompile_limit_hits": sum(
            n for reason, n in counters["unimplemented"].items() if "recompile" in reason.lower()
        ),
        "messages": MESSAGES.messages[since : since + 20],
    }


def time_steps(name: str, method: str, rows: int, corpus, device: torch.device, steps: int) -> dict:
    """Median step time of one preset and method on `rows` rows, after two warm-up steps."""
    cfg = preset(name)
    cfg.boundaries.method = method
    cfg.train.batch_size = rows
    torch.manual_seed(0)
    model = build_model(cfg).to(device).train()
    optimizer = make_optimizer(model, cfg)
    set_learning_rate(optimizer, cfg)
    stream = TrainStream(corpus.train, cfg.train.seq_len, rows, seed=0)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    counters.clear()
    first_message = len(MESSAGES.messages)
    seconds, rates, warmup = [], [], []
    for step in range(steps + 2):
        inputs, targets = (x.to(device, non_blocking=True) for x in stream.next_batch())
        start = time.perf_counter()
        parts = train_step(model, optimizer, inputs, targets, cfg, step)[1]
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if step >= 2:
            seconds.append(time.perf_counter() - start)
            rates.append(float(parts.get("boundary_rate", 1.0)))
        else:  # first calls: allocator warm-up and any compilation, reported apart
            warmup.append(time.perf_counter() - start)
            compiles_in_warmup = counters["frames"]["ok"]
    bytes_per_s = rows * cfg.train.seq_len / statistics.median(seconds)
    rate = statistics.mean(rates)
    flops = flops_per_byte(model, rate, cfg.train.seq_len)
    peak = peak_flops(device)
    result = {
        "preset": name,
        "method": method,
        "rows": rows,
        "seq_len": cfg.train.seq_len,
        "parameters": sum(p.numel() for p in model.parameters()),
        "step_seconds": seconds,
        "warmup_seconds": warmup,
        "bytes_per_s": bytes_per_s,
        "boundary_rate": rate,
        "flops_per_byte": flops,
        "mfu": flops * bytes_per_s / peak if peak else None,
        "peak_memory_bytes": peak_memory(device),
        "dynamo": {
            **dynamo_counts(first_message),
            "compiles_after_warmup": counters["frames"]["ok"] - compiles_in_warmup,
        },
    }
    del model, optimizer
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def training_curve(cfg, corpus, device: torch.device, seconds: float, compile: bool) -> dict:
    """Train `cfg` for `seconds` (the schedule ends on time) and report its validation curve."""
    counters.clear()
    first_message = len(MESSAGES.messages)
    with tempfile.TemporaryDirectory() as run_dir:
        summary = train(
            cfg,
            corpus,
            Path(run_dir) / "run",
            time_limit=seconds,
            device=device,
            progress=False,
            compile=compile,
        )
        records = [
            json.loads(line)
            for line in (Path(run_dir) / "run" / "metrics.jsonl").read_text().splitlines()
        ]
    curve = [
        {
            k: r.get(k)
            for k in (
                "step",
                "bytes",
                "elapsed",
                "val_bpb",
                "val_rate",
                "val_whitespace_recall",
                "val_word_start_recall",
            )
        }
        for r in records
        if "val_bpb" in r
    ]
    mfu = [r["mfu"] for r in records if "mfu" in r]
    return {
        "preset": cfg.preset,
        "method": "rl",
        "batch": [cfg.train.batch_size, cfg.train.seq_len],
        "grad_accum": cfg.train.grad_accum,
        "compiled": compile,
        "steps": summary["step"],
        "bytes": summary["bytes"],
        "bytes_per_s": summary["bytes_per_s"],
        "mfu_median": statistics.median(mfu) if mfu else None,
        "peak_memory_bytes": peak_memory(device),
        "dynamo": dynamo_counts(first_message),
        "validation": curve,
    }


def _first_line(error: BaseException) -> str:
    """The error's type and the first line of its message, for the report."""
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0] if message else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=str(default_device()))
    parser.add_argument(
        "--minutes", type=float, default=8.0, help="wall-clock budget of the whole script"
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=32,
        help="rows of a timed step (training: the preset's "
        "128-row batch as 128 / rows accumulation steps)",
    )
    parser.add_argument("--steps", type=int, default=5, help="timed steps per preset and method")
    parser.add_argument(
        "--data", help="training corpus (default: the embedded one; `english` once prepared)"
    )
    parser.add_argument(
        "--compile", action="store_true", help="compile the blocks in the training phase"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="the smoke preset everywhere: a quick check on CPU"
    )
    parser.add_argument(
        "--flex-everywhere",
        action="store_true",
        help="the CUDA attention path (FlexAttention) on any device: how the tests run it on a CPU",
    )
    parser.add_argument(
        "--out", help="JSON path (default: benchmarks/results/gpu-DATE-DEVICE.json)"
    )
    args = parser.parse_args()
    watch_dynamo()
    with flex_attention_everywhere() if args.flex_everywhere else contextlib.nullcontext():
        run(args)


def run(args: argparse.Namespace) -> None:
    """Time the configurations, train for the rest of the time, and write the report."""
    started = time.perf_counter()
    device = torch.device(args.device)
    corpus = load_corpus(args.data)
    timed_presets = ["smoke"] if args.smoke else ["paper-40m", "paper-147m"]
    device_name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or "cpu"
    )
    report = {
        "benchmark": "gpu",
        "date": time.strftime("%Y-%m-%d"),
        "device": device_name,
        "torch": torch.__version__,
        "flex_everywhere": args.flex_everywhere,
        "corpus": corpus.describe(),
        "timing": [],
        "training": None,
    }

    for name in timed_presets:
        for method in ("rl", "uniform"):
            try:
                row = time_steps(name, method, args.rows, corpus, device, args.steps)
            except torch.cuda.OutOfMemoryError:
                row = {"preset": name, "method": method, "error": "out of memory: lower --rows"}
            except Exception as e:  # any failure is this configuration's result; the next one runs
                row = {"preset": name, "method": method, "error": _first_line(e)}
            if "error" in row:
                row["rows"] = args.rows
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            report["timing"].append(row)
            print(
                json.dumps(
                    {
                        k: row.get(k)
                        for k in (
                            "preset",
                            "method",
                            "bytes_per_s",
                            "mfu",
                            "peak_memory_bytes",
                            "error",
                        )
                    }
                ),
                flush=True,
            )

    cfg = preset("smoke" if args.smoke else "paper-40m")
    cfg.boundaries.method = "rl"
    if not args.smoke:
        cfg.train.grad_accum = max(1, cfg.train.batch_size // args.rows)
    # the final eval
    left = args.minutes * 60 - (time.perf_counter() - started) - (5 if args.smoke else 45)
    speed = next((r["bytes_per_s"] for r in report["timing"] if "bytes_per_s" in r), 1e5)
    expected_steps = max(1, int(left * speed / (cfg.train.batch_size * cfg.train.seq_len)))
    cfg.train.max_steps = 10 * expected_steps  # the time limit ends the run and its schedule
    cfg.train.eval_every = max(1, expected_steps // 8)
    cfg.train.checkpoint_every = cfg.train.max_steps  # only the last one
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        report["training"] = training_curve(cfg, corpus, device, max(left, 1.0), args.compile)
    except Exception as e:  # the timing rows are kept whatever happens here
        report["training"] = {"error": _first_line(e)}
    report["wall_seconds"] = time.perf_counter() - started
    out = Path(
        args.out or f"benchmarks/results/gpu-{report['date']}-{device_name.replace(' ', '_')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    curve = report["training"].get("validation") or [None]
    print(
        json.dumps(
            {
                "training": {k: v for k, v in report["training"].items() if k != "validation"},
                "last_validation": curve[-1],
                "out": str(out),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
