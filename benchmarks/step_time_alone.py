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

Processes minutes apart see a shared machine at different speeds (this one drifts by more than the
5% being measured). `--side-by-side` runs each learned run at the same time as a uniform run, one
thread each, so that whatever slows the machine slows both: the ratio of the pair is read within the
same minutes. The default runs the processes one after another at `--threads`, as a user times them.

    python benchmarks/step_time_alone.py [--rounds 3] [--steps 80] [--threads 2] [--side-by-side]
        [--runs rl,rl-frozen] [--flags '--precision fp32']
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


def start(flags: list[str], steps: int, seed: int, threads: int, out: str) -> subprocess.Popen:
    """A training run in a fresh process, writing its metrics under `out`."""
    return subprocess.Popen(
        [sys.executable, "-m", "rltok", "train", "--preset", "tiny", "--max-steps", str(steps)]
        + ["--eval-every", str(10 * steps), "--seed", str(seed), "--out", out, "--quiet"]
        + flags,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)},
    )


def finish(proc: subprocess.Popen) -> tuple[int, str, float]:
    """Wait for a run: its exit code, the end of its stderr, its peak resident memory in GB."""
    err = proc.stderr.read().decode()[-2000:]
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, err, usage.ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux


def runs_at_once(named: dict[str, list[str]], steps: int, seed: int, threads: int) -> dict:
    """Train every named run at the same time, each in its own process; each run's intervals and
    peak resident memory."""
    with tempfile.TemporaryDirectory() as root:
        outs = {name: str(Path(root) / name) for name in named}
        procs = {
            name: start(flags, steps, seed, threads, outs[name]) for name, flags in named.items()
        }
        peaks = {}
        for name, proc in procs.items():
            code, err, peaks[name] = finish(proc)
            if code:
                for other in procs.values():
                    if other.returncode is None:
                        other.kill()
                        other.wait()
                raise SystemExit(f"{name} failed: {err}")
        return {
            name: {
                "intervals": intervals(Path(outs[name]) / "metrics.jsonl"),
                "peak_rss_gb": peaks[name],
            }
            for name in named
        }


def intervals(metrics: Path) -> list[dict]:
    """A run's 10-step intervals after the first: seconds per step, rate, rollouts."""
    logged = [json.loads(line) for line in metrics.read_text().splitlines()]
    logged = [r for r in logged if "loss" in r]  # the training lines, every 10 steps
    return [
        {
            "seconds_per_step": (b["elapsed"] - a["elapsed"]) / (b["step"] - a["step"]),
            "rate": b["boundary_rate"],
            "rollouts": b.get("rollouts", 0.0),
        }
        for a, b in zip(logged, logged[1:])
    ]


def summary(run: dict) -> dict:
    """Median seconds per step (the step a run settles into), the mean (its whole time after the
    first interval, rollouts and the rate's drift at the start included), mean rate, the intervals
    that ran rollouts, and peak resident memory."""
    intervals = run["intervals"]
    return {
        "peak_rss_gb": run["peak_rss_gb"],
        "seconds_per_step_median": statistics.median(i["seconds_per_step"] for i in intervals),
        "seconds_per_step_mean": statistics.fmean(i["seconds_per_step"] for i in intervals),
        "rate_mean": statistics.fmean(i["rate"] for i in intervals),
        "intervals_with_rollouts": sum(i["rollouts"] > 0 for i in intervals),
        "intervals": len(intervals),
    }


def one_round(
    r: int, flags: dict[str, list[str]], steps: int, threads: int, side_by_side: bool
) -> dict:
    """Every run (name: its flags, uniform's among them) once, who goes first rotating; each learned
    run's step over its uniform reference: the uniform run of the round, or under `side_by_side` the
    uniform run beside it."""
    names = [name for name in flags if not side_by_side or name != "uniform"]
    order = names[r % len(names) :] + names[: r % len(names)]
    learned = [name for name in order if name != "uniform"]
    if side_by_side:
        pairs = {
            name: runs_at_once({name: flags[name], "uniform": flags["uniform"]}, steps, r, 1)
            for name in learned
        }
        runs = {name: pair[name] for name, pair in pairs.items()}
        runs |= {f"uniform_beside_{name}": pair["uniform"] for name, pair in pairs.items()}
        reference = {name: f"uniform_beside_{name}" for name in learned}
    else:
        runs = {name: runs_at_once({name: flags[name]}, steps, r, threads)[name] for name in order}
        reference = {name: "uniform" for name in learned}
    step = {name: summary(ran) for name, ran in runs.items()}
    ratio = {
        f"{name}_over_uniform{kind}": step[name][f"seconds_per_step_{stat}"]
        / step[reference[name]][f"seconds_per_step_{stat}"]
        for name in learned
        for kind, stat in (("", "median"), ("_mean", "mean"))
    }
    return {
        "seed": r,
        "order": order,
        **step,
        **ratio,
        "intervals": {name: runs[name]["intervals"] for name in learned},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--side-by-side", action="store_true", help="each run beside a uniform one")
    parser.add_argument(
        "--runs", default=",".join(RUNS), help=f"comma-separated, of {', '.join(RUNS)}"
    )
    parser.add_argument(
        "--flags",
        default="",
        help="more `rltok train` flags for every run, e.g. '--precision fp32'",
    )
    parser.add_argument("--out", default=None, help="JSON path (default under benchmarks/results/)")
    args = parser.parse_args()
    name = "step_time_side_by_side" if args.side_by_side else "step_time_alone"
    out = Path(args.out or ROOT / f"benchmarks/results/{name}.json")
    names = args.runs.split(",")
    if set(names) - set(RUNS):
        parser.error(
            f"--runs names {', '.join(set(names) - set(RUNS))}; choose from {', '.join(RUNS)}"
        )
    flags = {name: RUNS[name] + args.flags.split() for name in dict.fromkeys(names + ["uniform"])}
    rounds = []
    for r in range(args.rounds):
        rounds.append(one_round(r, flags, args.steps, args.threads, args.side_by_side))
        print(json.dumps({k: v for k, v in rounds[-1].items() if "over" in k}), flush=True)
    learned = [name for name in names if name != "uniform"]
    report = {
        "benchmark": name,
        "date": time.strftime("%Y-%m-%d"),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "threads": 1 if args.side_by_side else args.threads,
        "steps_per_run": args.steps,
        "flags": args.flags,
        **{
            f"{name}_over_uniform{kind}_median": statistics.median(
                r[f"{name}_over_uniform{kind}"] for r in rounds
            )
            for name in learned
            for kind in ("", "_mean")
        },
        "rounds": rounds,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
