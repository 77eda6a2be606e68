"""Nothing lost: periodic atomic checkpoints, kills and resumes, damaged files, full disks, two
writers on one run, and non-finite steps."""

import errno
import importlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import SMOKE, newest_checkpoint
from safetensors.torch import load_file

import rltok.checkpoint
from rltok.checkpoint import damage
from rltok.cli import main
from rltok.config import preset
from rltok.data import load_corpus
from rltok.errors import UserError
from rltok.train import train

step_module = importlib.import_module("rltok.step")  # where the optimizer step computes the loss

STEPS = ["--max-steps", "60"]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """An uninterrupted 60-step smoke run to compare interrupted ones with."""
    out = tmp_path_factory.mktemp("straight") / "run"
    assert main([*SMOKE, *STEPS, "--out", str(out)]) == 0
    return out


def _same_weights(a, b):
    wa = load_file(newest_checkpoint(a) / "model.safetensors")
    wb = load_file(newest_checkpoint(b) / "model.safetensors")
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name


def _same_records(a, b):
    """The two runs logged the same numbers at every step (timings aside): where a resume went wrong
    shows as the first step that differs."""

    def records(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        timing = ("elapsed", "bytes_per_s", "mfu")
        return [{k: v for k, v in json.loads(line).items() if k not in timing} for line in lines]

    for x, y in zip(records(a), records(b), strict=True):
        assert x == y, f"the runs part at step {x['step']}: {x} against {y}"


def _start(out, *extra):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "rltok.cli", *SMOKE, *STEPS, "--out", str(out), *extra]
    return subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)


def _wait_for_step(out, step, timeout=90):
    """Until the run has logged `step` and written its first checkpoint (which lands just after the
    step-10 metrics line: a kill between the two would leave nothing to resume from)."""
    metrics = out / "metrics.jsonl"
    deadline = time.time() + timeout
    while time.time() < deadline:
        logged = metrics.exists() and any(
            json.loads(line).get("step", 0) >= step
            for line in metrics.read_text().splitlines()
            if line.endswith("}")
        )
        if logged and any(p.name[5:].isdigit() for p in (out / "checkpoints").glob("step-*")):
            return
        time.sleep(0.02)
    raise AssertionError(f"the run never reached step {step}")


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_resume_after_a_signal_at_a_random_step_equals_uninterrupted(straight, tmp_path, signum):
    """SIGINT/SIGTERM save and exit 130; SIGKILL loses only the steps since the last checkpoint.
    Either way, resuming ends with bit-identical weights: model, optimizer, schedule, RNG streams
    (boundary sampling included) and data position all come back."""
    at = random.Random(int(signum)).randint(5, 55)  # seeded: a failure replays at the same step
    out = tmp_path / "cut"
    proc = _start(out)
    _wait_for_step(out, at)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    if signum == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 130 and "continue with --resume" in err, err
    state = torch.load(newest_checkpoint(out) / "state.pt", weights_only=True)
    assert 0 < state["step"] < 60, f"killed near step {at}"
    assert main([*SMOKE, *STEPS, "--out", str(out), "--resume"]) == 0
    _same_records(straight, out)
    _same_weights(straight, out)


def test_resume_of_a_run_killed_before_its_first_checkpoint_starts_it_again(straight, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(straight, out)
    shutil.rmtree(out / "checkpoints")  # as if killed after config.json and a few metrics lines
    (out / "summary.json").unlink()
    with pytest.warns(UserWarning, match="no checkpoint yet .* starting it again from step 0"):
        assert main(["train", "--out", str(out), "--resume", "--quiet"]) == 0
    _same_weights(straight, out)
    assert (out / "metrics.jsonl").read_text().count('"val_bpb"') == (
        straight / "metrics.jsonl"
    ).read_text().count('"val_bpb"')


def test_newest_k_checkpoints_are_kept_with_checksums(straight):
    names = sorted(p.name for p in (straight / "checkpoints").iterdir())
    assert names == ["step-00000040", "step-00000050", "step-00000060"]  # every 10 steps, keep 3
    assert all(damage(straight / "checkpoints" / name) is None for name in names)


def test_damaged_newest_checkpoint_falls_back_to_the_previous_one(straight, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(straight, run)
    weights = newest_checkpoint(run) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # truncated by a crash
    with pytest.warns(
        UserWarning, match="step-00000060 is damaged: model.safetensors does not match its checksum"
    ):
        assert main(["eval", "--checkpoint", str(run), "--max-bytes", "2048", "--json"]) == 0

    # resuming sets the damaged one aside and redoes the lost steps from step 50
    with pytest.warns(UserWarning, match="falling back to an earlier one"):
        assert main([*SMOKE, *STEPS, "--out", str(run), "--resume"]) == 0
    assert (run / "checkpoints" / "step-00000060.damaged").is_dir()
    _same_weights(straight, run)


def test_resume_with_every_checkpoint_damaged_is_refused_and_keeps_the_log(
    straight, tmp_path, capsys
):
    run = tmp_path / "run"
    shutil.copytree(straight, run)
    for checkpoint in (run / "checkpoints").glob("step-*"):
        (checkpoint / "model.safetensors").write_bytes(b"")
    log = (run / "metrics.jsonl").read_text()
    with pytest.warns(UserWarning, match="is damaged"):
        assert main([*SMOKE, *STEPS, "--out", str(run), "--resume"]) == 2
    assert "every checkpoint in" in capsys.readouterr().err
    assert (run / "metrics.jsonl").read_text() == log  # nothing restarted, nothing dropped


def test_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    real_save, calls = rltok.checkpoint.save_file, []

    def full_disk_on_second_save(*args, **kwargs):
        calls.append(1)
        if len(calls) >= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(rltok.checkpoint, "save_file", full_disk_on_second_save)
    cfg = preset("smoke")
    cfg.train.max_steps = 20
    run = tmp_path / "run"
    # the periodic save at step 20 is the final one: it fails, says so, and step 10 survives intact
    with pytest.raises(
        UserError,
        match=r"step 20 \(No space left on device\); the previous checkpoint "
        r".*step-00000010 is intact",
    ):
        train(cfg, load_corpus(None), run, progress=False)
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["step-00000010"]
    assert damage(run / "checkpoints" / "step-00000010") is None


def test_a_failed_periodic_save_warns_and_training_goes_on(tmp_path, monkeypatch):
    real_save, calls = rltok.checkpoint.save_file, []

    def full_disk_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(rltok.checkpoint, "save_file", full_disk_once)
    cfg = preset("smoke")
    with pytest.warns(UserWarning, match="checkpoint of step 10 .*no earlier checkpoint exists"):
        summary = train(cfg, load_corpus(None), tmp_path / "run", progress=False)
    assert summary["step"] == 20 and newest_checkpoint(tmp_path / "run").name == "step-00000020"


def test_second_writer_is_refused_and_a_stale_lock_is_taken_over(tmp_path, capsys):
    out = tmp_path / "run"
    proc = _start(out, "--max-steps", "100000")
    try:
        _wait_for_step(out, 15)  # past the first checkpoint, at step 10
        code = main([*SMOKE, "--out", str(out), "--resume"])
        assert code == 2
        assert "is in use by another rltok run (pid" in capsys.readouterr().err
    finally:
        proc.kill()
        proc.communicate()
    # the dead writer's name is still in the file
    assert (out / ".lock").read_text().startswith("pid")
    with pytest.warns(UserWarning, match="stale lock from pid .* no longer running"):
        assert main([*SMOKE, "--out", str(out), "--resume", "--max-steps", "20"]) == 0
    assert (out / ".lock").read_text() == ""


def test_a_run_that_fails_after_a_checkpoint_but_before_its_first_record_keeps_it(
    tmp_path, monkeypatch
):
    real, calls = step_module.training_loss, []

    def fails_on_step_4(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("a failure on step 4")
        return real(*args, **kwargs)

    monkeypatch.setattr(step_module, "training_loss", fails_on_step_4)
    cfg = preset("smoke")
    cfg.train.checkpoint_every, cfg.train.log_every = 2, 10  # a checkpoint, then the failure
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="step 4"):
        train(cfg, load_corpus(None), run, progress=False)
    assert not (run / "metrics.jsonl").exists()
    assert damage(newest_checkpoint(run)) is None and newest_checkpoint(run).name == "step-00000002"


def _poison(monkeypatch, bad_steps):
    """Make the policy loss NaN on the given (1-based) steps."""
    real, calls = step_module.training_loss, []

    def poisoned(*args, **kwargs):
        loss, parts = real(*args, **kwargs)
        calls.append(1)
        if len(calls) in bad_steps:
            parts["loss_policy"] = parts["loss_policy"] * float("nan")
            loss = loss * float("nan")
        return loss, parts

    monkeypatch.setattr(step_module, "training_loss", poisoned)


def test_nonfinite_steps_are_skipped_and_logged(tmp_path, monkeypatch, capsys):
    _poison(monkeypatch, {3, 7})
    cfg = preset("smoke")
    run = tmp_path / "run"
    summary = train(cfg, load_corpus(None), run, progress=False)
    assert summary["step"] == 20
    skipped = [
        json.loads(line)
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if "skipped" in line
    ]
    assert skipped == [{"step": 3, "skipped": "policy loss"}, {"step": 7, "skipped": "policy loss"}]
    assert "step 3: non-finite policy loss; step skipped" in capsys.readouterr().err
    state = torch.load(newest_checkpoint(run) / "state.pt", weights_only=True)
    assert all(s["step"] == 18 for s in state["optimizer"]["state"].values())  # 20 steps, 2 skipped
    weights = load_file(newest_checkpoint(run) / "model.safetensors")
    assert all(torch.isfinite(w).all() for w in weights.values())


def test_consecutive_nonfinite_steps_save_and_stop(tmp_path, monkeypatch):
    _poison(monkeypatch, set(range(5, 100)))
    cfg = preset("smoke")
    cfg.train.max_nonfinite_steps = 3
    run = tmp_path / "run"
    with pytest.raises(
        UserError, match=r"3 consecutive steps \(5-7\) had a non-finite policy loss"
    ):
        train(cfg, load_corpus(None), run, progress=False)
    assert newest_checkpoint(run).name == "step-00000007"
    weights = load_file(newest_checkpoint(run) / "model.safetensors")
    assert all(torch.isfinite(w).all() for w in weights.values())


# without the surprisal prior, whose confident start would keep the rollouts off from the first steps
GROUP = [
    "--group-size",
    "4",
    "--group-texts",
    "2",
    "--group-entropy",
    "0.7",
    "--surprisal-prior",
    "0",
]


def test_group_estimator_run_resumes_bit_identical_and_evaluates(straight, tmp_path, capsys):
    """K = 4 with a switch on the policy's entropy, which toggles in a smoke run: the entropy that
    decides the next step's rollouts is part of the checkpoint, so a resumed run takes the same turns."""
    whole = tmp_path / "whole"
    assert main([*SMOKE, *STEPS, *GROUP, "--out", str(whole)]) == 0
    records = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines()]
    rollouts = {r["rollouts"] for r in records if "rollouts" in r}
    assert rollouts == {0, 6}, rollouts  # both with and without the group estimator

    out = tmp_path / "cut"
    proc = _start(out, *GROUP)
    _wait_for_step(out, random.Random(45).randint(5, 45))  # seeded, so a failure replays
    proc.send_signal(signal.SIGTERM)
    assert proc.communicate(timeout=60) and proc.returncode == 130
    assert main([*SMOKE, *STEPS, "--out", str(out), "--resume"]) == 0
    _same_records(whole, out)
    _same_weights(whole, out)
    with pytest.raises(AssertionError):  # the grouped run is not the plain one
        _same_weights(straight, out)
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(out), "--max-bytes", "4096", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 < scores["bpb"] < 8 and 0 <= scores["word_start_recall"] <= 1
