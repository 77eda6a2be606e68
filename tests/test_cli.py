"""The command line end to end on the smoke preset: round trip, interruption, bad input."""

import dataclasses
import json
import re

import pytest
import torch
from conftest import SMOKE, newest_checkpoint

import rltok
from rltok.cli import main, parser
from rltok.cli.train import config_from_args
from rltok.config import BoundaryConfig, Config, LossWeights, TrainConfig, preset


def test_train_writes_checkpoint_metrics_and_summary(smoke_run):
    assert sorted(p.name for p in (smoke_run / "checkpoints").iterdir()) == [
        "step-00000010",
        "step-00000020",
    ]
    checkpoint = newest_checkpoint(smoke_run)
    assert {p.name for p in checkpoint.iterdir()} == {
        "model.safetensors",
        "config.json",
        "state.pt",
        "manifest.json",
    }
    lines = [json.loads(line) for line in (smoke_run / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["step"] == 20 and "val_bpb" in lines[-1]
    assert any("loss_policy" in line and "boundary_rate" in line for line in lines)
    assert json.loads((smoke_run / "summary.json").read_text())["step"] == 20


def test_eval_round_trip_reproduces_training_validation(smoke_run, capsys):
    """Weights survive save/load exactly: eval of the loaded model equals the trainer's last validation."""
    summary = json.loads((smoke_run / "summary.json").read_text())
    assert (
        main(
            [
                "eval",
                "--checkpoint",
                str(smoke_run),
                "--split",
                "val",
                "--max-bytes",
                "4096",
                "--json",
            ]
        )
        == 0
    )
    scores = json.loads(capsys.readouterr().out)
    assert scores["bpb"] == pytest.approx(summary["val_bpb"], abs=1e-4)
    assert main(["eval", "--checkpoint", str(smoke_run), "--max-bytes", "8192", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    for key in (
        "bpb",
        "bpb_doc_mean",
        "rate",
        "bytes_per_chunk",
        "whitespace_recall",
        "whitespace_precision",
    ):
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


def _error(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    return code, err[-1] if err else ""


def test_existing_run_is_not_overwritten(smoke_run, capsys):
    weights = newest_checkpoint(smoke_run) / "model.safetensors"
    before = weights.read_bytes()
    code, line = _error(capsys, [*SMOKE, "--out", str(smoke_run)])
    assert code == 2 and "--resume" in line
    assert weights.read_bytes() == before


@pytest.mark.parametrize(
    "section,cls", [("boundaries", BoundaryConfig), ("loss", LossWeights), ("train", TrainConfig)]
)
def test_every_config_field_with_a_flag_is_set_by_rltok_train(section, cls, monkeypatch):
    """A field declared with rltok.config.flag reaches `rltok train`: its flag sets it and nothing else."""
    # any value will do, in range or not: this is about reaching the field
    monkeypatch.setattr(Config, "validate", lambda self: self)
    flagged = [f for f in dataclasses.fields(cls) if "flag" in f.metadata]
    assert flagged
    for f in flagged:
        old = getattr(getattr(preset("tiny"), section), f.name)
        if isinstance(old, bool):
            argv, value = [], not old
        elif "choices" in f.metadata:
            value = next(c for c in f.metadata["choices"] if c != old)
            argv = [value]
        else:
            value = old + 1
            argv = [str(value)]
        for name in (f.metadata["flag"], *f.metadata.get("aliases", ())):
            expected = preset("tiny")
            setattr(getattr(expected, section), f.name, value)
            assert config_from_args(parser().parse_args(["train", name, *argv])) == expected, name
