"""Pictures of runs for a paper or a slide: several runs' validation curves side by side (`rltok plot
RUN ...`), and a text with its chunk ends and boundary probabilities (`rltok plot --segmentation`)."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import torch

from rltok.checkpoint import run_config
from rltok.errors import UserError
from rltok.flops import flops_per_byte
from rltok.pretrained import build_model
from rltok.segment import Segmentation, shown_character

# (key in metrics.jsonl, axis label): the validation records' and the training records' curves
CURVES = (
    ("val_bpb", "validation bits per byte"),
    ("val_rate", "validation boundary rate"),
    ("policy_entropy", "policy entropy (training, nats)"),
)
X_AXES = {"bytes": "training bytes", "flops": "training FLOPs"}
# CJK text needs a font with its glyphs: the first of these that is installed draws it
FONTS = ["DejaVu Sans Mono", "Noto Sans Mono CJK SC", "Noto Sans CJK SC", "WenQuanYi Zen Hei"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)  # fonts not installed
    return plt


def read_records(run_dir: Path) -> list[dict]:
    """A run's metrics.jsonl records, in order (a line cut short by a kill is skipped)."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise UserError(
            f"{run_dir} holds no metrics.jsonl; pass run directories that rltok train wrote"
        )
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def training_flops(run_dir: Path, records: list[dict]) -> list[float]:
    """Each record's training FLOPs so far: the bytes since the previous training record times the
    FLOPs per byte at that record's boundary rate (rltok.flops)."""
    cfg = run_config(run_dir)
    with torch.device("meta"):  # the shapes are enough
        model = build_model(cfg)
    total, last_bytes, per_byte, out = 0.0, 0, None, []
    for r in records:
        if "loss" in r:  # a training record: its rate prices the bytes since the last one
            per_byte = flops_per_byte(model, r.get("boundary_rate"), cfg.train.seq_len)
        if per_byte is None:
            per_byte = flops_per_byte(model, cfg.boundaries.target_rate, cfg.train.seq_len)
        total += (r["bytes"] - last_bytes) * per_byte
        last_bytes = r["bytes"]
        out.append(total)
    return out


def curves(runs: list[Path], out: Path, x: str = "bytes") -> Path:
    """Validation bits per byte, validation rate and policy entropy against training bytes (or
    FLOPs), one line per run, labelled by its directory's name; a PNG of 1500 x 450 pixels."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(CURVES), figsize=(15, 4.5), dpi=100)
    for run_dir in runs:
        records = read_records(run_dir)
        if not any("val_bpb" in r for r in records):
            raise UserError(
                f"{run_dir} has no validation record yet (the first comes at step "
                f"{run_config(run_dir).train.eval_every}); plot it once it has got that far"
            )
        xs = training_flops(run_dir, records) if x == "flops" else [r["bytes"] for r in records]
        for ax, (key, _) in zip(axes, CURVES):
            points = [(at, r[key]) for at, r in zip(xs, records) if key in r]
            if points:
                ax.plot(*zip(*points), label=run_dir.name, linewidth=1.4)
    for ax, (key, label) in zip(axes, CURVES):
        ax.set_xlabel(X_AXES[x])
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
        else:  # flat and rule runs log no policy entropy
            ax.text(0.5, 0.5, f"no run logs {key}", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def segmentation_picture(seg: Segmentation, out: Path, title: str, width: int = 48) -> Path:
    """The text in rows of `width` characters (a newline starts a row), each character's background
    as red as its boundary probability, a green bar after each chunk's last character."""
    plt = _pyplot()
    rows: list[list[tuple[str, bool, float]]] = [[]]
    for ch, ends, p in seg.per_character():
        if len(rows[-1]) == width:
            rows.append([])
        rows[-1].append((shown_character(ch), ends, p))
        if ch == "\n":
            rows.append([])
    fig = plt.figure(figsize=(0.25 * width + 0.5, 0.45 * len(rows) + 0.9), dpi=100)
    ax = fig.add_axes((0.01, 0.01, 0.98, 1 - 0.6 / fig.get_figheight()))
    ax.set_xlim(0, width)
    ax.set_ylim(len(rows), 0)
    ax.axis("off")
    ax.set_title(f"{title}: {len(seg.chunks())} chunks, {len(seg.data)} bytes", fontsize=10)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing")  # no font has it: a box
        for y, row in enumerate(rows):
            for col, (glyph, ends, p) in enumerate(row):
                ax.add_patch(plt.Rectangle((col, y + 0.1), 1, 0.8, color=(0.86, 0.24, 0.16, p)))
                ax.text(col + 0.5, y + 0.5, glyph, ha="center", va="center", family=FONTS)
                if ends:
                    ax.plot([col + 1, col + 1], [y + 0.05, y + 0.95], color="#1a4", linewidth=2)
        fig.savefig(out)
    plt.close(fig)
    return out
