"""The GPU benchmark: one command for a borrowed GPU machine, ending by itself within its budget
(8.75 minutes by default), every number in one JSON that is rewritten after every part (run it through
benchmarks/gpu.sh; docs/scaling.md says how to read it).

Each part runs in a process of its own (benchmarks/gpu_parts.py) under a time limit, with one
compile cache shared by all, so a crash, a sticky CUDA error or a hang costs one row. In order:

1. kernels: FlexAttention forward and backward through the project's masks against SDPA; if it is
   off, nothing else runs (the timings would be of a wrong kernel);
2. step: training steps of paper-40m with rl and uniform boundaries, the group estimator (tiny) beside
   uniform (tiny), paper-40m with hnet: bytes/s, model-FLOPs utilisation, peak memory, compile time
   apart;
3. curve: paper-40m with uniform, then rl, the same seed and data, for as many steps as the time left
   allows (a warm-up a tenth of them): validation bits per byte and boundary statistics; read from
   the run's metrics.jsonl while it trains, so an interruption keeps the validations done.

A part that would not finish before the budget is spent is not started (recorded as skipped). SIGTERM
stops the part in flight, records what it had, writes the JSON and prints the summary. Compiler and
part logs go to a file of their own beside the JSON; stdout gets one line per part and the summary
last. `--device cpu --smoke` runs the same plan on the smoke preset in two minutes on a CPU.

    python benchmarks/gpu.py [--minutes 8.75] [--rows 32] [--data PATH] [--out FILE] [--compile]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass
class Part:
    """One row of the report: the arguments of gpu_parts.py, a time limit, and the least time it
    needs to be worth starting."""

    name: str
    argv: list[str]
    limit: float
    needs: float
    run_dir: Path | None = None  # a curve's run directory, read while it trains


class Stopped(Exception):
    """SIGTERM (or SIGINT) arrived."""


def write_json(path: Path, value: dict) -> None:
    """Write JSON atomically: a reader sees the old file or the new one, never half of one."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(value, indent=1))
    os.replace(part, path)


def curve_of(run_dir: Path) -> dict:
    """The validation records and the training records' last loss and utilisation, from metrics.jsonl."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return {"validation": []}
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    keys = ("step", "bytes", "elapsed", "val_bpb", "val_rate", "val_whitespace_recall")
    keys += ("val_word_start_recall",)
    training = [r for r in records if "loss" in r]
    mfu = sorted(r["mfu"] for r in training if r.get("mfu") is not None)
    return {
        "validation": [{k: r.get(k) for k in keys} for r in records if "val_bpb" in r],
        "steps_done": training[-1]["step"] if training else 0,
        "bytes_per_s": training[-1]["bytes_per_s"] if training else None,
        "mfu_median": mfu[len(mfu) // 2] if mfu else None,
    }


class Benchmark:
    """Runs the parts in order within the budget and keeps the report on disk up to date."""

    def __init__(self, args: argparse.Namespace, out: Path, work: Path):
        self.args, self.out, self.work = args, out, work
        self.deadline = time.monotonic() + 60 * args.minutes
        self.log = out.with_name(out.stem + "-log.txt")
        self.child: subprocess.Popen | None = None
        self.report = {
            "benchmark": "gpu",
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "argv": sys.argv[1:],
            "budget_seconds": 60 * args.minutes,
            "log": self.log.name,
            "finished": False,
            "parts": {},
        }

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        self.report["wall_seconds"] = round(60 * self.args.minutes - self.left(), 1)
        write_json(self.out, self.report)

    def run(self, part: Part) -> dict:
        """Run one part in its own process (its own process group, so a timeout ends its compile
        workers too); its result, or why it has none."""
        if min(part.limit, self.left()) < part.needs:
            return {"skipped": f"{self.left():.0f} s of the budget left, it needs {part.needs:.0f}"}
        result_file = self.work / f"{part.name.replace(' ', '-')}.json"
        argv = [
            sys.executable,
            str(HERE / "gpu_parts.py"),
            *part.argv,
            "--result",
            str(result_file),
        ]
        argv += ["--device", self.args.device] + (
            ["--data", self.args.data] if self.args.data else []
        )
        argv += ["--flex-everywhere"] if self.args.flex_everywhere else []
        limit = min(part.limit, self.left() - 5)
        started = time.monotonic()
        with self.log.open("a") as log:
            log.write(f"\n==== {part.name}: {' '.join(argv)}\n")
            log.flush()
            self.child = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
            try:
                while self.child.poll() is None and time.monotonic() - started < limit:
                    time.sleep(1)
                    if part.run_dir is not None:  # the curve so far, on disk at every validation
                        self.progress(part, curve_of(part.run_dir))
            finally:
                timed_out = self.child.poll() is None
                self.stop_child()
        result = json.loads(result_file.read_text()) if result_file.exists() else {}
        # the process's start and imports included, which the part's own "seconds" leave out
        result["wall_seconds"] = round(time.monotonic() - started, 1)
        if part.run_dir is not None:
            result.update(curve_of(part.run_dir))
        if timed_out:
            result["error"] = f"timed out after {limit:.0f} s (its limit or the budget's end)"
        elif not result_file.exists():
            result["error"] = (
                f"its process ended with exit code {self.child.returncode} and no result"
            )
        return result

    def progress(self, part: Part, so_far: dict) -> None:
        """Save a running part's results so far when they have grown."""
        if so_far != self.report["parts"].get(part.name, {}).get("so_far"):
            self.report["parts"][part.name] = {"running": True, "so_far": so_far}
            self.save()

    def interrupted(self, part: Part | None, why: str) -> None:
        """Record a stop request: the part in flight ends and keeps what it had."""
        self.stop_child()
        self.report["stopped"] = f"{why} after {60 * self.args.minutes - self.left():.0f} s"
        if part is not None and self.report["parts"].get(part.name, {"running": True}).get(
            "running"
        ):
            kept = curve_of(part.run_dir) if part.run_dir is not None else {}
            self.report["parts"][part.name] = {**kept, "error": f"stopped by {why}"}

    def stop_child(self) -> None:
        """End the part in flight and everything it started."""
        if self.child is None or self.child.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.child.pid, sig)
                self.child.wait(wait)
                return
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue

    def record(self, part: Part, result: dict) -> None:
        """Put a part's result into the report, save it, and print its one line."""
        machine = {k: result.pop(k) for k in ("device", "torch", "triton", "cuda") if k in result}
        self.report.setdefault("machine", machine)
        self.report["parts"][part.name] = result
        self.save()
        print(f"gpu: {part.name}: {headline(result)}", flush=True)


def headline(result: dict) -> str:
    """One line of a part's result."""
    if "skipped" in result or "error" in result:
        why = result.get("skipped") or result["error"]
        return ("skipped: " if "skipped" in result else "error: ") + why
    if "checks" in result:
        worst = max(
            (c["max_difference"], f"{check} {name}")
            for check, parts in result["checks"].items()
            for name, c in parts.items()
        )
        return f"{'passed' if result['passed'] else 'FAILED'}, largest difference {worst[0]:.2e} ({worst[1]})"
    if "bytes_per_s" in result and "step_seconds_median" in result:
        mfu = f", mfu {result['mfu']:.3f}" if result.get("mfu") is not None else ""
        return (
            f"{result['bytes_per_s']:,.0f} bytes/s, {result['step_seconds_median'] * 1e3:.0f} ms a step"
            f"{mfu}, peak {result['peak_memory_bytes'] / 2**30:.2f} GiB, rate {result['boundary_rate']:.3f},"
            f" warm-up {sum(result['warmup_seconds']):.1f} s"
        )
    last = (result.get("validation") or [{}])[-1]
    if "val_bpb" in last:
        return f"step {last['step']}: val bpb {last['val_bpb']:.4f}, rate {last.get('val_rate') or 1:.3f}"
    return "no validation yet"


def plan(args: argparse.Namespace) -> list[Part]:
    """The step parts in the order they run (the curves are planned once their speed is known)."""
    big, small = ("smoke", "smoke") if args.smoke else ("paper-40m", "tiny")
    slow = 1 if args.smoke else 3  # a fresh process's imports and compiles, on a GPU
    timed = ["--steps", str(args.steps), "--rows", str(args.rows)]
    group = ["--set", "boundaries.group.entropy=0"]  # the group estimator on every step
    return [
        Part("kernels", ["kernels"], limit=60 * slow, needs=15 * slow),
        Part(
            f"step {big} rl",
            ["step", "--preset", big, "--method", "rl", *timed],
            40 * slow,
            15 * slow,
        ),
        Part(
            f"step {big} uniform",
            ["step", "--preset", big, "--method", "uniform", *timed],
            40 * slow,
            15 * slow,
        ),
        Part(
            f"group {small} rl",
            ["step", "--preset", small, "--method", "rl", "--steps", str(args.steps), *group],
            30 * slow,
            10 * slow,
        ),
        Part(
            f"group {small} uniform",
            ["step", "--preset", small, "--method", "uniform", "--steps", str(args.steps)],
            30 * slow,
            10 * slow,
        ),
        Part(
            f"step {big} hnet",
            ["step", "--preset", big, "--method", "hnet", *timed],
            40 * slow,
            15 * slow,
        ),
    ]


def curves(args: argparse.Namespace, bench: Benchmark) -> list[Part]:
    """uniform and rl trained for the same steps: half of what half the time left allows each at the
    slower one's measured speed (a fresh process's start and compiles set apart; the other half
    for validations, checkpoints and a busier machine), at most 200 on the smoke preset."""
    big = "smoke" if args.smoke else "paper-40m"
    overhead = 12 if args.smoke else 60
    each = (bench.left() - 10) / 2
    if each < overhead + 5:  # not enough for both: neither runs, rather than one alone
        each = 0
    steps = {}
    for method in ("rl", "uniform"):
        step = bench.report["parts"].get(f"step {big} {method}", {})
        seconds = step.get("step_seconds_median")
        if seconds:  # the preset's batch is micro-batches of the timed rows
            batch = 4 if args.smoke else 128
            steps[method] = 0.5 * (each - overhead) / (seconds * max(1, batch // args.rows))
    guess = 50 if args.smoke else 20  # neither speed was measured
    n = int(min(min(steps.values(), default=guess), 200 if args.smoke else math.inf))
    argv = ["curve", "--preset", big, "--steps", str(max(n, 6)), "--rows", str(args.rows)]
    argv += ["--compile"] if args.compile else []
    return [
        Part(
            f"curve {big} {method}",
            [*argv, "--method", method, "--run-dir", str(bench.work / method)],
            limit=each,
            needs=overhead + 5,
            run_dir=bench.work / method,
        )
        for method in ("uniform", "rl")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--minutes", type=float, help="the whole run's budget (default 8.75; --smoke 2)"
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=32,
        help="rows of a timed step (the curves: micro-batches of this many rows)",
    )
    parser.add_argument(
        "--steps", type=int, default=10, help="timed steps per configuration, after 3 warm-up steps"
    )
    parser.add_argument("--data", help="training corpus (default: the embedded one)")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="compile the blocks in the curves (not proven on CUDA)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="the smoke preset everywhere: the check on a CPU"
    )
    parser.add_argument(
        "--flex-everywhere",
        action="store_true",
        help="the CUDA attention path (FlexAttention) on any device",
    )
    parser.add_argument(
        "--out",
        help="the JSON (default: $OUT/gpu.json when OUT is set, else benchmarks/results/gpu-DATE.json)",
    )
    args = parser.parse_args()
    if args.minutes is None:
        args.minutes = 2.0 if args.smoke else 8.75
    if args.smoke:
        args.rows = min(args.rows, 4)
    default = (
        Path(os.environ["OUT"]) / "gpu.json"
        if os.environ.get("OUT")
        else HERE / "results" / f"gpu-{time.strftime('%Y-%m-%d')}.json"
    )
    out = Path(args.out) if args.out else default
    out.parent.mkdir(parents=True, exist_ok=True)

    def stop(signum, frame):
        raise Stopped(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with tempfile.TemporaryDirectory(prefix="rltok-gpu-") as work:
        # one compile cache for every part: a kernel compiled by one is loaded by the next
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(work) / "inductor"))
        os.environ.setdefault("TRITON_CACHE_DIR", str(Path(work) / "triton"))
        bench = Benchmark(args, out, Path(work))
        bench.save()
        print(f"gpu: writing {out} (logs: {bench.log}); budget {args.minutes:g} min", flush=True)
        part = None
        try:
            for part in plan(args):
                bench.record(part, bench.run(part))
                if (
                    part.name == "kernels"
                    and bench.report["parts"]["kernels"].get("passed") is False
                ):
                    bench.report["stopped"] = (
                        "the FlexAttention kernel check failed: nothing else ran"
                    )
                    break
            else:
                for part in curves(args, bench):
                    bench.record(part, bench.run(part))
                bench.report["finished"] = True
        except Stopped as why:
            bench.interrupted(part, str(why))
        bench.save()
    summary(bench.report, out)
    sys.exit(0 if bench.report["finished"] else 1)


def summary(report: dict, out: Path) -> None:
    """The last lines of the output: what ran, how it went, where the JSON is."""
    print(
        f"\ngpu: summary ({report['wall_seconds']:.0f} s of {report['budget_seconds']:.0f}; JSON {out})"
    )
    for name, result in report["parts"].items():
        print(f"  {name}: {headline(result)}")
    if "stopped" in report:
        print(f"  stopped: {report['stopped']}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
