"""`rltok plot`: several runs' curves against bytes or FLOPs, a text's segmentation as a picture, and
one sentence for what cannot be drawn."""

import json
import shutil
import struct

import pytest
from conftest import SMOKE

from rltok.checkpoint import run_config
from rltok.cli import main
from rltok.flops import flops_per_byte
from rltok.plots import read_records, training_flops
from rltok.pretrained import build_model


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])  # the IHDR chunk's width and height


@pytest.fixture(scope="module")
def flat_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "flat"
    assert main([*SMOKE, "--boundaries", "flat", "--max-steps", "10", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("x", ["bytes", "flops"])
def test_curves_of_two_runs_make_a_png_of_the_expected_size(smoke_run, flat_run, tmp_path, x):
    out = tmp_path / "curves.png"
    assert main(["plot", str(smoke_run), str(flat_run), "--x", x, "--out", str(out)]) == 0
    assert _png_size(out) == (1500, 450)


def test_training_flops_of_a_flat_model_are_its_bytes_times_its_flops_per_byte(flat_run):
    """The flat model's work does not follow a rate: every record's FLOPs are its bytes times one
    constant (the U-Net's follow the logged boundary rate, interval by interval)."""
    cfg = run_config(flat_run)
    per_byte = flops_per_byte(build_model(cfg), None, cfg.train.seq_len)
    records = read_records(flat_run)
    assert training_flops(flat_run, records) == pytest.approx(
        [r["bytes"] * per_byte for r in records]
    )


def test_a_run_without_validation_yet_is_one_sentence(smoke_run, tmp_path, capsys):
    early = tmp_path / "early"
    shutil.copytree(smoke_run, early)
    lines = (early / "metrics.jsonl").read_text().splitlines()
    kept = [line for line in lines if "val_bpb" not in json.loads(line)]
    (early / "metrics.jsonl").write_text("\n".join(kept) + "\n")
    assert main(["plot", str(smoke_run), str(early), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert f"{early} has no validation record yet" in err and "Traceback" not in err
    assert not (tmp_path / "c.png").exists()


def test_a_segmentation_picture_has_a_row_per_48_characters(smoke_run, tmp_path):
    out = tmp_path / "seg.png"
    text = "To be, or not to be, that is the question: whether 'tis nobler"  # 63 characters
    assert main(["plot", "--segmentation", str(smoke_run), "--text", text, "--out", str(out)]) == 0
    assert _png_size(out) == (1250, 2 * 45 + 90)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--segmentation", "RUN"], "give --text, and no RUN"),
        ([], "name the run directories to plot"),
        (["nowhere"], "nowhere holds no metrics.jsonl"),
    ],
)
def test_what_cannot_be_drawn_is_one_sentence(smoke_run, tmp_path, capsys, args, says):
    args = [str(smoke_run) if a == "RUN" else a for a in args]
    assert main(["plot", *args, "--out", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
