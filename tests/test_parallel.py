"""Data parallelism under torchrun on CPU (gloo): two processes equal one with gradient accumulation,
FSDP2 checkpoints load anywhere, resumes reproduce, and a rank that dies stops the run cleanly."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import SMOKE, newest_checkpoint
from safetensors.torch import load_file

from rltok.checkpoint import damage, load
from rltok.cli import main
from rltok.data import load_corpus
from rltok.evaluate import evaluate

FP32 = ["--precision", "fp32"]


def torchrun(*args: str, wait: bool = True, timeout: float = 300, module: str | None = "rltok"):
    """`torchrun --standalone --nproc-per-node 2 -m rltok ...` with one thread per process; a run still
    going after `timeout` seconds is killed with its ranks and fails the test."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        *(["-m", module] if module else []),
        *args,
    ]
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    if not wait:
        return proc
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(
            f"torchrun {' '.join(args)} still ran after {timeout} s (a hang at exit?):\n{err[-3000:]}"
        )
    assert proc.returncode == 0, err[-3000:]
    return out, err


def weights(run) -> dict[str, torch.Tensor]:
    return load_file(newest_checkpoint(run) / "model.safetensors")


def max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


@pytest.mark.parametrize("method", ["rl", "hnet", "entropy"])
def test_two_processes_equal_one_process_with_two_accumulation_steps(tmp_path, method):
    # without the surprisal prior: standardising an untrained head's entropies (spread about 0.003 nats)
    # turns the rounding of its statistics, averaged over ranks or over micro-batches, into other samples
    steps = ["--max-steps", "8", "--boundaries", method, *FP32, "--surprisal-prior", "0"]
    torchrun(*SMOKE, *steps, "--out", str(tmp_path / "ddp"))
    assert main([*SMOKE, *steps, "--grad-accum", "2", "--out", str(tmp_path / "one")]) == 0
    assert max_difference(weights(tmp_path / "ddp"), weights(tmp_path / "one")) < 1e-5
    # rank 0 alone logs, and what it logs is the mean over ranks: the single process's numbers
    ddp, one = (
        [json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        for run in ("ddp", "one")
    )
    assert [r["step"] for r in ddp] == [r["step"] for r in one]
    for a, b in zip(ddp, one):
        for key in ("loss", "loss_lm", "val_bpb", "val_rate"):
            assert (key in a) == (key in b) and abs(a.get(key, 0) - b.get(key, 0)) < 1e-5, key


STOP_WITH_A_LIVE_WRAPPER = """
import weakref, torch
from rltok.parallel import Parallel
par, device = Parallel.start(torch.device("cpu"))
model = par.wrap(torch.nn.Linear(4, 4), device)
model(torch.randn(2, 4)).sum().backward()
reducer = weakref.ref(model.reducer)
par.stop()  # the wrapper is still referenced, as a traceback or a reference cycle keeps it
print(f"rank {par.rank}: reducer alive after stop: {reducer() is not None}", flush=True)
"""


def test_stop_frees_the_ddp_reducer_while_the_group_still_exists(tmp_path):
    """DDP's reducer holds the process group from C++. Freed after the group is destroyed (by the
    collector, at exit), it drops the group's last reference while holding the GIL, and gloo's destructor
    can then wait forever for a worker thread that needs the GIL: a hang at exit. `stop` frees it first,
    even while the wrapper itself lives on."""
    script = tmp_path / "stop.py"
    script.write_text(STOP_WITH_A_LIVE_WRAPPER)
    out, _ = torchrun(str(script), module=None, timeout=120)
    # the ranks share one pipe, so their lines may interleave
    assert sorted(re.findall(r"rank (\d): reducer alive after stop: (True|False)", out)) == [
        ("0", "False"),
        ("1", "False"),
    ], out


@pytest.mark.slow
def test_short_two_process_runs_end_cleanly_every_time(tmp_path):
    """A loop of short runs over each layout and a method that all-reduces its own statistics (the
    entropy rule), each of which must exit, every rank, well within its timeout."""
    layouts = [["--boundaries", "entropy"], ["--boundaries", "rl", "--group-size", "2"], ["--fsdp"]]
    for i in range(6):
        run = tmp_path / f"run{i}"
        torchrun(
            *SMOKE,
            "--max-steps",
            "2",
            "--eval-every",
            "1",
            *layouts[i % 3],
            "--out",
            str(run),
            timeout=120,
        )
        assert json.loads((run / "summary.json").read_text())["step"] == 2


def test_fsdp_checkpoint_loads_in_one_process_and_scores_the_same_and_rank_0_alone_logs(tmp_path):
    out = tmp_path / "fsdp"
    # without the surprisal prior, as above
    no_prior = ["--surprisal-prior", "0"]
    tracked = ["--log-to", "tensorboard"]  # its segmentation sample's forward is collective here
    stdout, _ = torchrun(
        *SMOKE, "--max-steps", "6", *FP32, *no_prior, "--fsdp", *tracked, "--out", str(out)
    )
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert damage(newest_checkpoint(out)) is None
    assert len(list((out / "tensorboard").iterdir())) == 1  # rank 0 alone logs
    model = load(out)  # one process, no process group: the full weights were gathered on rank 0
    cfg = model.config.train
    val = evaluate(
        model,
        load_corpus(None).val,
        cfg.seq_len,
        cfg.batch_size,
        max_bytes=cfg.eval_bytes,
        precision="fp32",
    )
    assert abs(val["bpb"] - summary["val_bpb"]) < 1e-5
    # the same weights as DDP: sharding changes where the numbers live, not what they are
    torchrun(*SMOKE, "--max-steps", "6", *FP32, *no_prior, "--out", str(tmp_path / "ddp"))
    assert max_difference(weights(out), weights(tmp_path / "ddp")) < 1e-5


def test_two_process_run_resumes_to_the_same_weights(tmp_path):
    """Stopped after its step-10 checkpoint and resumed on two processes, a run ends where an
    uninterrupted one does (weights, optimizer and data position come back on every rank)."""
    steps = ["--max-steps", "20", *FP32, "--checkpoint-every", "10"]
    torchrun(*SMOKE, *steps, "--out", str(tmp_path / "straight"))
    cut = tmp_path / "cut"
    torchrun(*SMOKE, *steps, "--out", str(cut))
    # back to step 10, as if killed there
    for late in sorted((cut / "checkpoints").glob("step-*"))[1:]:
        for f in late.iterdir():
            f.unlink()
        late.rmdir()
    (cut / "summary.json").unlink()
    # any layout resumes any other
    torchrun(*SMOKE, *steps, "--out", str(cut), "--resume", "--fsdp")
    assert max_difference(weights(tmp_path / "straight"), weights(cut)) < 1e-5


def _ranks(proc: subprocess.Popen) -> dict[int, int]:
    """pid of each rank among the children of a torchrun process."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
            environ = open(f"/proc/{entry}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == proc.pid:
            rank = next((int(v[5:]) for v in environ if v.startswith(b"RANK=")), None)
            if rank is not None:
                found[rank] = int(entry)
    return found


def test_a_rank_that_dies_stops_the_run_with_one_message_and_no_half_written_checkpoint(tmp_path):
    out = tmp_path / "run"
    proc = torchrun(
        *SMOKE,
        "--max-steps",
        "100000",
        "--checkpoint-every",
        "3",
        *FP32,
        "--out",
        str(out),
        wait=False,
    )
    deadline = time.time() + 120
    while not list((out / "checkpoints").glob("step-*")) and time.time() < deadline:
        time.sleep(0.1)
    assert time.time() < deadline, "the run wrote no checkpoint"
    os.kill(_ranks(proc)[1], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    messages = [line for line in err.splitlines() if line.startswith("rltok: error:")]
    assert len(messages) == 1 and "another process of this 2-process run stopped" in messages[0], (
        err[-3000:]
    )
    assert "relaunch with --resume" in messages[0]
    finished = [p for p in (out / "checkpoints").iterdir() if not p.name.startswith(".")]
    assert finished and all(damage(p) is None for p in finished)


def test_fsdp_without_torchrun_and_uneven_batches_are_one_sentence(tmp_path, capsys):
    assert main([*SMOKE, "--fsdp", "--out", str(tmp_path / "a")]) == 2
    assert "--fsdp shards the model across the processes of torchrun" in capsys.readouterr().err
    assert main([*SMOKE, "--grad-accum", "3", "--out", str(tmp_path / "b")]) == 2
    assert "--grad-accum must be at least 1 and divide --batch-size 4" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_global_centering_centres_over_every_rank_batch():
    """batch_relative with a sum over ranks equals batch_relative over the ranks' rows stacked."""
    from rltok.boundaries.estimator import batch_relative

    rewards, valid = torch.randn(6, 9), torch.rand(6, 9) > 0.2
    mine, other = slice(0, 2), slice(2, 6)
    other_totals = torch.stack(
        [(rewards[other] * valid[other]).sum(0), valid[other].float().sum(0)]
    )
    centred = batch_relative(
        rewards[mine], valid[mine], sum_across=lambda totals: totals + other_totals
    )
    assert torch.allclose(centred, batch_relative(rewards, valid)[mine], atol=1e-6)


def test_global_centering_trains_on_two_processes(tmp_path):
    stdout, _ = torchrun(
        *SMOKE,
        "--max-steps",
        "4",
        "--group-size",
        "1",
        "--global-centering",
        "--out",
        str(tmp_path / "run"),
    )
    assert json.loads(stdout.strip().splitlines()[-1])["step"] == 4
    boundaries = json.loads((tmp_path / "run" / "config.json").read_text())["boundaries"]
    assert boundaries["estimator"]["global_centering"]


def test_sigterm_on_one_rank_saves_and_stops_every_rank_after_the_same_step(tmp_path):
    out = tmp_path / "run"
    proc = torchrun(
        *SMOKE,
        "--max-steps",
        "100000",
        "--checkpoint-every",
        "100000",
        *FP32,
        "--out",
        str(out),
        wait=False,
    )
    deadline = time.time() + 120
    while time.time() < deadline and not (
        (out / "metrics.jsonl").exists() and '"val_bpb"' in (out / "metrics.jsonl").read_text()
    ):
        time.sleep(0.1)
    os.kill(_ranks(proc)[1], signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert "a stop request on another rank at step" in err and "continue with --resume" in err, err[
        -3000:
    ]
    # one save, by rank 0, at the agreed step
    (checkpoint,) = [p for p in (out / "checkpoints").iterdir()]
    assert damage(checkpoint) is None and int(checkpoint.name[5:]) >= 10


def test_optimizer_state_by_name_and_by_position_both_load():
    """Checkpoints keep the optimizer state by parameter name; those of earlier single-process runs
    kept it by position, and still resume."""
    from conftest import smoke_model

    from rltok.config import preset
    from rltok.parallel import Parallel
    from rltok.step import make_optimizer

    cfg, par = preset("smoke"), Parallel()
    model = smoke_model("rl")
    optimizer = make_optimizer(model, cfg)
    model(torch.randint(0, 256, (2, 32))).logits.square().mean().backward()
    optimizer.step()
    model.zero_grad(set_to_none=True)  # as at a resume: no gradients yet
    for state in (par.full_optimizer_state(model, optimizer), optimizer.state_dict()):
        fresh = make_optimizer(model, cfg)
        par.load_optimizer_state(model, fresh, state)
        # keyed by position
        saved, loaded = (optimizer.state_dict()["state"], fresh.state_dict()["state"])
        assert saved and all(torch.equal(saved[k]["exp_avg"], loaded[k]["exp_avg"]) for k in saved)
