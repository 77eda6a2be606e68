"""`rltok train --log-to tensorboard wandb`: the trackers' own files, read back with their own readers,
hold exactly metrics.jsonl's numbers; a resume continues the same runs; a missing extra is one sentence."""

import html
import json
import shutil
import struct
import sys
from pathlib import Path

import pytest
from conftest import SMOKE

from rltok.checkpoint import load
from rltok.cli import main
from rltok.data import load_corpus
from rltok.segment import segment, to_plain
from rltok.tracking import WANDB_ID_FILE, held_out_line

TRACKED = [*SMOKE, "--max-steps", "20", "--eval-every", "10", "--log-to", "tensorboard", "wandb"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")


def _metrics(run: Path) -> dict[int, dict]:
    """metrics.jsonl's numbers by step (a step's training and validation records merged)."""
    out: dict[int, dict] = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        numbers = {k: v for k, v in record.items() if k != "step" and type(v) in (int, float)}
        out.setdefault(record["step"], {}).update(numbers)
    return out


def _tensorboard(run: Path) -> tuple[dict[int, dict], dict[int, str]]:
    """Scalars by step and texts by step, as TensorBoard's reader loads them (purges applied)."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"tensors": 0})
    acc.Reload()
    scalars: dict[int, dict] = {}
    texts: dict[int, str] = {}
    for tag in acc.Tags()["tensors"]:
        events = acc.Tensors(tag)
        assert len({e.step for e in events}) == len(events), f"{tag} logged twice at a step"
        for e in events:
            value = tensor_util.make_ndarray(e.tensor_proto)
            if tag == "val_segmentation/text_summary":
                texts[e.step] = value.item().decode()
            elif not tag.endswith("/text_summary"):
                scalars.setdefault(e.step, {})[tag] = value.item()
    return scalars, texts


def _wandb_history(path: Path) -> dict[int, dict]:
    """The history rows of a W&B transaction log (run-ID.wandb: a LevelDB-style log of protobuf
    records in 32 KiB blocks after a 7-byte header), by step."""
    from wandb.proto import wandb_internal_pb2

    data, pos, block, payload = path.read_bytes(), 7, 32768, b""
    rows: dict[int, dict] = {}
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        payload += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            payload = b""
            if record.WhichOneof("record_type") == "history":
                items = {
                    i.key or "/".join(i.nested_key): json.loads(i.value_json)
                    for i in record.history.item
                }
                rows.setdefault(record.history.step.num, {}).update(
                    {k: v for k, v in items.items() if not k.startswith("_")}
                )
    return rows


def _wandb_runs(run: Path) -> list[Path]:
    return sorted((run / "wandb").glob("offline-run-*/run-*.wandb"))


def _numbers(rows: dict[int, dict]) -> dict[int, dict]:
    """The scalars of W&B rows (a media panel's fields are nested: val_segmentation/size)."""
    return {
        step: {k: v for k, v in row.items() if type(v) in (int, float) and "/" not in k}
        for step, row in rows.items()
    }


def test_tensorboard_and_wandb_hold_exactly_the_metrics_and_a_segmentation_sample(tmp_path):
    run = tmp_path / "run"
    assert main([*TRACKED, "--out", str(run)]) == 0
    metrics = _metrics(run)
    scalars, texts = _tensorboard(run)
    assert scalars == metrics  # every number, at every step, to the last bit (float64 events)
    (wandb_file,) = _wandb_runs(run)
    assert wandb_file.name == f"run-{(run / WANDB_ID_FILE).read_text()}.wandb"
    history = _wandb_history(wandb_file)
    assert _numbers(history) == metrics
    # at each validation, a held-out line with the chunk ends the model draws then
    assert sorted(texts) == [10, 20]
    line = held_out_line(load_corpus(None).val[0])
    drawn = to_plain(segment(load(run), line, greedy=True))  # the final weights' chunks
    assert "|" in drawn and texts[20] == "    " + drawn  # indented: markdown shows it as it is
    assert texts[10].removeprefix("    ").replace("|", "") == line
    for step in (10, 20):  # W&B's row holds a reference to the panel's file
        assert any(k.startswith("val_segmentation/") for k in history[step])
    (last,) = (run / "wandb").glob("offline-run-*/files/media/html/val_segmentation_20_*.html")
    assert html.escape(drawn) in last.read_text()


def test_a_resume_continues_the_same_tensorboard_and_wandb_runs(tmp_path):
    """Killed after its step-10 checkpoint (the step-20 one removed): the resume logs steps 11-20
    again; TensorBoard shows each step once, W&B appends to the run it began."""
    run = tmp_path / "run"
    flags = [*TRACKED, "--checkpoint-every", "10", "--out", str(run)]
    assert main(flags) == 0
    for late in run.glob("checkpoints/step-00000020*"):
        shutil.rmtree(late)
    (run / "summary.json").unlink()
    assert main([*flags, "--resume"]) == 0
    metrics = _metrics(run)
    scalars, texts = _tensorboard(run)
    assert scalars == metrics and sorted(texts) == [10, 20]
    first, resumed = (_wandb_history(p) for p in _wandb_runs(run))
    assert _wandb_runs(run)[0].name == _wandb_runs(run)[1].name  # one run id
    assert _numbers(resumed) == {s: metrics[s] for s in metrics if s > 10}  # after the checkpoint
    kept = {s: row for s, row in _numbers(first).items() if s <= 10}
    assert kept == {s: metrics[s] for s in metrics if s <= 10}  # the part before the checkpoint


def test_a_missing_tracker_package_is_one_sentence_and_leaves_no_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    run = tmp_path / "run"
    assert main([*SMOKE, "--max-steps", "2", "--log-to", "wandb", "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert "--log-to wandb needs the wandb package" in err and "rltok[track]" in err
    assert "Traceback" not in err and not run.exists()
