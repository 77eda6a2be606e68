"""benchmarks/gpu.sh as a borrowed GPU machine runs it, simulated on a CPU: a preinstalled torch,
rltok not installed, no package index (PIP_NO_INDEX=1, so any install attempt fails), OUT set.
scripts/test_device_like.sh runs these with torch 2.11, the version those machines hold."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).parents[1]
GPU_SH = ["bash", str(ROOT / "benchmarks" / "gpu.sh")]
PLAN = ["kernels", "step smoke rl", "step smoke uniform", "group smoke rl", "group smoke uniform"]
PLAN += ["step smoke hnet", "curve smoke uniform", "curve smoke rl"]

pytestmark = [
    pytest.mark.device_like,
    pytest.mark.slow,
    pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU simulation"),
]


def device_like(out: Path, **extra: str) -> dict:
    """The environment of a lent GPU machine: no index to install from, OUT set, one thread."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "PIP_NO_INDEX": "1", "OUT": str(out), "OMP_NUM_THREADS": "1", **extra}


def said(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gpu.sh:")]


def test_gpu_sh_refuses_at_once_where_there_is_neither_torch_nor_a_gpu(tmp_path):
    """No torch in python3 and no NVIDIA device: one sentence within seconds, nothing installed."""
    if shutil.which("nvidia-smi") or list(Path("/dev").glob("nvidia*")):
        pytest.skip("this machine has an NVIDIA device")
    bare = Path(sys.base_prefix) / "bin" / "python3"
    probe = subprocess.run([str(bare), "-c", "import torch"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("the base interpreter has torch")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(bare)
    path = f"{tmp_path / 'bin'}:/usr/bin:/bin"
    started = time.monotonic()
    done = subprocess.run(
        GPU_SH, capture_output=True, text=True, timeout=60, env=device_like(tmp_path, PATH=path)
    )
    assert done.returncode == 2 and len(said(done.stderr)) == 1, done.stderr
    assert "no torch and no NVIDIA GPU" in done.stderr and "--device cpu --smoke" in done.stderr
    assert time.monotonic() - started < 10
    assert "setting up .venv" not in done.stderr  # nothing was installed


def test_gpu_sh_refuses_in_one_sentence_without_cuda(tmp_path):
    """torch without a CUDA device: one sentence, exit 2, before anything trains."""
    started = time.monotonic()
    done = subprocess.run(
        GPU_SH, capture_output=True, text=True, timeout=60, env=device_like(tmp_path)
    )
    assert done.returncode == 2 and len(said(done.stderr)) == 1, done.stderr
    assert "no CUDA device" in done.stderr and "--device cpu --smoke" in done.stderr
    assert time.monotonic() - started < 10 and not list(tmp_path.iterdir())


def test_gpu_sh_names_a_missing_package_instead_of_installing_it(tmp_path):
    """A package the benchmark imports that cannot be imported is named in one sentence; no pip."""
    shadow = tmp_path / "shadow" / "tokenizers"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not on this machine')\n")
    done = subprocess.run(
        [*GPU_SH, "--device", "cpu", "--smoke"],
        capture_output=True,
        text=True,
        timeout=60,
        env=device_like(tmp_path, PYTHONPATH=str(tmp_path / "shadow")),
    )
    assert done.returncode == 2 and len(said(done.stderr)) == 1, done.stderr
    assert "cannot import tokenizers" in done.stderr and "pip install tokenizers" in done.stderr
    assert "Collecting" not in done.stdout + done.stderr  # no install was attempted


def test_gpu_benchmark_runs_every_part_and_lands_under_out(tmp_path):
    """The whole plan on the smoke preset within its budget: the kernel check (forward on a CPU),
    every timed configuration, both curves with their validations; the JSON under $OUT, compiler
    output in the log beside it, the summary last on stdout, no install attempted."""
    started = time.monotonic()
    done = subprocess.run(
        [*GPU_SH, "--device", "cpu", "--smoke", "--minutes", "2.5"],
        capture_output=True,
        text=True,
        timeout=300,
        env=device_like(tmp_path),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert time.monotonic() - started < 2.5 * 60 + 20
    report = json.loads((tmp_path / "gpu.json").read_text())
    assert report["finished"] and list(report["parts"]) == PLAN
    assert report["machine"]["torch"] == torch.__version__
    parts = report["parts"]
    assert parts["kernels"]["passed"] and parts["kernels"]["backward"].startswith("not run")
    for name in PLAN[1:6]:
        assert parts[name]["bytes_per_s"] > 0 and parts[name]["peak_memory_bytes"] > 0, parts[name]
        assert parts[name]["mfu"] is None and len(parts[name]["step_seconds"]) == 10
    assert parts["group smoke rl"]["rows"] == parts["group smoke uniform"]["rows"]
    for name in PLAN[6:]:
        curve = parts[name]["validation"]
        assert curve and curve[-1]["step"] == parts[name]["summary"]["step"] > 0, parts[name]
        assert all(0 < v["val_bpb"] < 9 for v in curve)
    assert (
        parts["curve smoke rl"]["summary"]["step"]
        == parts["curve smoke uniform"]["summary"]["step"]
    )
    assert "==== kernels" in (tmp_path / "gpu-log.txt").read_text()
    lines = done.stdout.strip().splitlines()
    assert lines[-len(PLAN) - 1].startswith("gpu: summary") and lines[-1].startswith("  curve")
    assert "Collecting" not in done.stdout + done.stderr


def test_gpu_benchmark_keeps_the_rows_done_when_stopped(tmp_path):
    """SIGTERM mid-run (as the device tool's limit sends it): the part in flight ends, the JSON
    keeps every row done so far and says why it stopped, the summary is printed, no part is left
    running."""
    run = subprocess.Popen(
        [*GPU_SH, "--device", "cpu", "--smoke"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=device_like(tmp_path),
    )
    report_path = tmp_path / "gpu.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if report_path.exists() and "step smoke rl" in json.loads(report_path.read_text())["parts"]:
            break
    run.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    stdout, stderr = run.communicate(timeout=60)
    assert time.monotonic() - stopped < 20
    report = json.loads(report_path.read_text())
    assert not report["finished"] and report["stopped"].startswith("SIGTERM"), report
    assert report["parts"]["kernels"]["passed"] and report["parts"]["step smoke rl"]["bytes_per_s"]
    assert "gpu: summary" in stdout, stdout + stderr
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert not left.stdout.strip(), left.stdout


def test_gpu_benchmark_keeps_its_budget_and_records_each_failure(tmp_path):
    """A budget too short for the plan: parts that fail record their message and the next runs;
    parts that would outrun the budget are not started; the run ends by itself in time."""
    started = time.monotonic()
    done = subprocess.run(
        [*GPU_SH, "--device", "cpu", "--smoke", "--minutes", "0.75"]
        + ["--data", str(tmp_path / "missing.txt")],
        capture_output=True,
        text=True,
        timeout=120,
        env=device_like(tmp_path),
    )
    assert time.monotonic() - started < 0.75 * 60 + 15
    report = json.loads((tmp_path / "gpu.json").read_text())
    assert report["finished"] and list(report["parts"]) == PLAN, done.stdout
    parts = report["parts"]
    failed = [p for p in parts.values() if "missing.txt" in p.get("error", "")]
    skipped = [p for p in parts.values() if "skipped" in p]
    assert parts["kernels"]["passed"] and failed and skipped, parts
    assert len(failed) + len(skipped) == len(PLAN) - 1
