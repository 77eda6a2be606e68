"""A training step of the CPU preset (RL: group estimator, surprisal prior, the real step counter and
noise) against a uniform step, each run alone in its own process, the processes alternating on one
machine, written as JSON (benchmarks/results/step_time_alone.json).

`train_throughput.py` interleaves the methods' steps in one process from one starting model; a run
alone is what a user times. Each process here trains `--steps` steps of `rltok train --preset tiny`
and logs the time of every 10 steps; the first 10 (warm-up) are dropped. Beside each interval's
seconds per step the script keeps what the step did: the boundary rate (the main network's work grows
with the chunks) and the group estimator's rollouts (extra segmentations while the policy is unsure),
and the median interval of each run is the step it settles into. `rl-frozen` is the RL step's
machinery alone (the policy frozen at the target rate, no prior, one segmentation per text), and
`rl-frozen-prior` the same with the surprisal prior, which places the chunk ends on whitespace.

    python benchmarks/step_time_alone.py [--rounds 3] [--steps 80] [--threads 2] [--out FILE]
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

ROOT = Path(__file__).resolve().parents[1]
RUNS = {
    "rl": [],  # the preset
    # the RL step's machinery alone: the policy frozen at the target rate, no prior, no rollouts
    "rl-frozen": ["--policy-lr-mult", "0", "--surprisal-prior", "0", "--group-size", "1"],
    # the same with the prior: its cue is computed, and it puts the chunk ends on whitespace
    "rl-frozen-prior": ["--policy-lr-mult", "0", "--group-size", "1"],
    "uniform": ["--boundaries", "uniform"],
}


def one_run(flags: list[str], steps: int, seed: int, threads: int) -> list[dict]:
    """Train alone in a fresh process; its 10-step intervals after the first: seconds per step, rate,
    rollouts."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [sys.executable, "-m", "rltok", "train", "--preset", "tiny", "--max-steps", str(steps)]
            + ["--eval-every", str(10 * steps), "--seed", str(seed), "--out", out, "--quiet"]
            + flags,
            check=True,
            capture_output=True,
            env={**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)},
        )
        lines = (Path(out) / "metrics.jsonl").read_text().splitlines()
    logged = [json.loads(line) for line in lines]
    logged = [r for r in logged if "loss" in r]  # the training lines, every 10 steps
    return [
        {
            "seconds_per_step": (b["elapsed"] - a["elapsed"]) / (b["step"] - a["step"]),
            "rate": b["boundary_rate"],
            "rollouts": b.get("rollouts", 0.0),
        }
        for a, b in zip(logged, logged[1:])
    ]


def summary(intervals: list[dict]) -> dict:
    """Median seconds per step, mean rate, and the share of intervals that ran rollouts."""
    return {
        "seconds_per_step_median": statistics.median(i["seconds_per_step"] for i in intervals),
        "rate_mean": statistics.fmean(i["rate"] for i in intervals),
        "intervals_with_rollouts": sum(i["rollouts"] > 0 for i in intervals),
        "intervals": len(intervals),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/step_time_alone.json"))
    args = parser.parse_args()
    rounds = []
    for r in range(args.rounds):
        names = list(RUNS)
        order = names[r % len(names) :] + names[: r % len(names)]  # who goes first rotates
        runs = {name: one_run(RUNS[name], args.steps, r, args.threads) for name in order}
        uniform = summary(runs["uniform"])["seconds_per_step_median"]
        rounds.append(
            {
                "seed": r,
                "order": order,
                **{name: summary(intervals) for name, intervals in runs.items()},
                **{
                    f"{name}_over_uniform": summary(runs[name])["seconds_per_step_median"] / uniform
                    for name in RUNS
                    if name != "uniform"
                },
                "rl_intervals": runs["rl"],
            }
        )
        print(json.dumps({k: v for k, v in rounds[-1].items() if "over" in k}), flush=True)
    report = {
        "benchmark": "step_time_alone",
        "date": time.strftime("%Y-%m-%d"),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "threads": args.threads,
        "steps_per_run": args.steps,
        **{
            f"{name}_over_uniform_median": statistics.median(
                r[f"{name}_over_uniform"] for r in rounds
            )
            for name in RUNS
            if name != "uniform"
        },
        "rounds": rounds,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
