"""What `--log-to tensorboard wandb` costs a training step, measured in one run and written as JSON.

Two readings. In process: the trainer's own calls into the trackers (each metrics record sent to
both, and at each validation the segmentation sample: a forward over one held-out line, and its text
sent) are timed and divided by the run's training time. Side by side: a run without trackers and one
with both (W&B offline: WANDB_MODE=offline) train the same steps on the same seed, back to back in an
order that rotates, and the ratio of their training times is taken per round; that one also counts
what runs beside the trainer (W&B's service process) and is as noisy as the machine. Opening and
closing the trackers happen once per run, outside the steps, and are reported apart.

The run's shape is the preset's: a metrics record every `log_every` steps and a validation every
`eval_every` (the tiny preset: 10 and 38), over `--steps` steps.

    python benchmarks/tracking_overhead.py [--preset tiny] [--steps 38] [--rounds 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from rltok import tracking
from rltok.config import preset
from rltok.data import embedded_corpus

TRACKED = ("tensorboard", "wandb")
trainer = importlib.import_module("rltok.train")  # the module (rltok.train is also the function)


class Stopwatch:
    """Time spent inside the wrapped functions, summed."""

    def __init__(self):
        self.seconds = 0.0

    def wrap(self, owner: type, name: str) -> None:
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(owner, name, timed)


def one_run(cfg, corpus, log_to: tuple[str, ...], in_steps: Stopwatch, around: Stopwatch) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        in_steps.seconds = around.seconds = 0.0
        start = time.perf_counter()
        summary = trainer.train(cfg, corpus, Path(tmp) / "run", progress=False, log_to=log_to)
        return {
            "train_s": summary["elapsed"],  # the steps and validations (rltok.train's clock)
            "wall_s": time.perf_counter() - start,
            "tracker_calls_s": in_steps.seconds,
            "open_close_s": around.seconds,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--steps", type=int, default=38)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/tracking_overhead.json")
    args = ap.parse_args()
    os.environ.setdefault("WANDB_MODE", "offline")
    cfg = preset(args.preset)
    cfg.train.max_steps = args.steps
    corpus = embedded_corpus()
    in_steps, around = Stopwatch(), Stopwatch()
    for name in ("log", "text"):
        in_steps.wrap(tracking.Trackers, name)
    in_steps.wrap(trainer.Run, "segmentation_sample")
    for name in ("__init__", "__exit__"):
        around.wrap(tracking.Trackers, name)
    rounds = []
    for i in range(args.rounds):
        order = [(), TRACKED] if i % 2 == 0 else [TRACKED, ()]
        runs = {
            "tracked" if log_to else "plain": one_run(cfg, corpus, log_to, in_steps, around)
            for log_to in order
        }
        runs["ratio"] = runs["tracked"]["train_s"] / runs["plain"]["train_s"]
        runs["in_process_share"] = runs["tracked"]["tracker_calls_s"] / runs["tracked"]["train_s"]
        print(json.dumps(runs), flush=True)
        rounds.append(runs)
    result = {
        "preset": args.preset,
        "steps": args.steps,
        "log_every": cfg.train.log_every,
        "eval_every": cfg.train.eval_every,
        "trackers": list(TRACKED),
        "machine": platform.processor() or platform.machine(),
        "threads": os.environ.get("OMP_NUM_THREADS", "all"),
        "in_process_share_median": statistics.median(r["in_process_share"] for r in rounds),
        "side_by_side_ratio_median": statistics.median(r["ratio"] for r in rounds),
        "open_close_s_median": statistics.median(r["tracked"]["open_close_s"] for r in rounds),
        "rounds": rounds,
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=1))


if __name__ == "__main__":
    main()
