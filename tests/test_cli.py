"""The command line end to end on the smoke preset: round trip, interruption, bad input."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import rltok
from rltok.cli import main

SMOKE = ["train", "--preset", "smoke", "--quiet"]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "smoke"
    assert main([*SMOKE, "--out", str(out)]) == 0
    return out


def test_train_writes_checkpoint_metrics_and_summary(smoke_run):
    checkpoint = smoke_run / "checkpoint"
    assert {p.name for p in checkpoint.iterdir()} == {"model.safetensors", "config.json", "state.pt"}
    lines = [json.loads(line) for line in (smoke_run / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["step"] == 20 and "val_bpb" in lines[-1]
    assert any("loss_policy" in line and "boundary_rate" in line for line in lines)
    assert json.loads((smoke_run / "summary.json").read_text())["step"] == 20


def test_eval_round_trip_reproduces_training_validation(smoke_run, capsys):
    """Weights survive save/load exactly: eval of the loaded model equals the trainer's last validation."""
    summary = json.loads((smoke_run / "summary.json").read_text())
    assert main(["eval", "--checkpoint", str(smoke_run), "--split", "val", "--max-bytes", "4096", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["bpb"] == pytest.approx(summary["val_bpb"], abs=1e-4)
    assert main(["eval", "--checkpoint", str(smoke_run), "--max-bytes", "8192", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    for key in ("bpb", "bpb_doc_mean", "rate", "bytes_per_chunk", "whitespace_recall", "whitespace_precision"):
        assert isinstance(scores[key], float)
    assert 0 < scores["rate"] < 1 and scores["bytes_per_chunk"] == pytest.approx(1 / scores["rate"])


def test_python_api(smoke_run):
    model = rltok.load(smoke_run)
    assert not model.training
    ids = rltok.encode("To be, or not to be")
    assert ids[0] == rltok.BOS and len(ids) == 20
    out = model(ids[None])
    assert out.logits.shape == (1, 20, 257) and out.boundaries.shape == (1, 20)
    forced = torch.zeros(1, 20, dtype=torch.long)
    forced[0, ::4] = 1
    assert torch.equal(model(ids[None], boundaries=forced).boundaries, forced)


@pytest.mark.parametrize("fmt", ["json", "html", "ansi", "plain"])
def test_segment_formats(smoke_run, capsys, fmt):
    text = "Now is the winter of our discontent\nMade glorious summer"
    assert main(["segment", "--checkpoint", str(smoke_run), "--text", text, "--format", fmt]) == 0
    shown = capsys.readouterr().out
    if fmt == "json":
        result = json.loads(shown)
        assert len(result["boundaries"]) == len(result["probs"]) == len(text)
        assert "".join(result["chunks"]) == text
        assert len(result["chunks"]) == sum(result["boundaries"][:-1]) + 1
    elif fmt == "html":
        assert shown.startswith("<!doctype html>") and shown.count("<span") == len(text)
    elif fmt == "ansi":
        assert re.sub(r"\x1b\[[0-9;]*m", "", shown)[:-1] == text
    else:
        assert shown[:-1].replace("|", "") == text


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL])
def test_resume_equals_uninterrupted(tmp_path, signum):
    """Ctrl-C saves and exits; SIGKILL loses only the steps since the last periodic checkpoint.
    Either way, resuming ends with exactly the weights of an uninterrupted run."""
    steps = ["--max-steps", "150"]
    assert main([*SMOKE, *steps, "--out", str(tmp_path / "straight")]) == 0
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "rltok.cli", *SMOKE, *steps, "--out", str(tmp_path / "cut")]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "cut" / "metrics.jsonl"
    deadline = time.time() + 60
    while not (metrics.exists() and metrics.read_text().count("\n") >= 5) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    if signum == signal.SIGINT:
        assert proc.returncode == 130, err
        assert "continue with --resume" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    state = torch.load(tmp_path / "cut" / "checkpoint" / "state.pt", weights_only=True)
    assert 0 < state["step"] < 150
    assert main([*SMOKE, *steps, "--out", str(tmp_path / "cut"), "--resume"]) == 0
    a = load_file(tmp_path / "straight" / "checkpoint" / "model.safetensors")
    b = load_file(tmp_path / "cut" / "checkpoint" / "model.safetensors")
    for name in a:
        assert torch.equal(a[name], b[name]), name


def _error(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    return code, err[-1] if err else ""


def test_bad_inputs_end_in_one_clear_sentence(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    folder = tmp_path / "nothing"
    folder.mkdir()
    (folder / "blank.txt").write_bytes(b"")
    bad_jsonl = tmp_path / "bad.jsonl"
    bad_jsonl.write_text('{"text": "fine"}\n{"title": "no text"}\n')
    out = ["--out", str(tmp_path / "never")]
    cases = {
        "does not exist": [*SMOKE, "--data", str(tmp_path / "missing.txt"), *out],
        "is empty": [*SMOKE, "--data", str(empty), *out],
        "holds no non-empty files": [*SMOKE, "--data", str(folder), *out],
        "line 2 has no string field": [*SMOKE, "--data", str(bad_jsonl), *out],
        "strictly between 0 and 1": [*SMOKE, "--target-rate", "-0.1", *out],
        "strictly between 0 and 1 ": [*SMOKE, "--target-rate", "1.5", *out],
        "holds no rltok checkpoint": ["eval", "--checkpoint", str(tmp_path)],
    }
    for needle, argv in cases.items():
        code, line = _error(capsys, argv)
        assert code == 2, argv
        assert line.startswith("rltok: error:") and needle.strip() in line, line
    assert not (tmp_path / "never").exists()


def test_unknown_flag_and_preset_are_rejected(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--preset", "huge"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'huge'" in capsys.readouterr().err


def test_existing_run_is_not_overwritten(smoke_run, capsys):
    before = (smoke_run / "checkpoint" / "model.safetensors").read_bytes()
    code, line = _error(capsys, [*SMOKE, "--out", str(smoke_run)])
    assert code == 2 and "--resume" in line
    assert (smoke_run / "checkpoint" / "model.safetensors").read_bytes() == before


def test_checkpoint_from_another_config_is_refused(smoke_run, tmp_path, capsys):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(smoke_run / "checkpoint", broken)
    config = json.loads((broken / "config.json").read_text())
    config["model"]["d_model"] = 128
    (broken / "config.json").write_text(json.dumps(config))
    code, line = _error(capsys, ["eval", "--checkpoint", str(broken)])
    assert code == 2 and "do not fit the architecture" in line


def test_checkpoint_swap_interrupted_by_a_kill_is_recovered(smoke_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(smoke_run / "checkpoint", run / "checkpoint.old")  # killed between the two renames
    assert main(["eval", "--checkpoint", str(run), "--max-bytes", "2048", "--json"]) == 0
    assert (run / "checkpoint" / "model.safetensors").exists()
