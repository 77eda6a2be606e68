"""Checkpoints: a directory with safetensors weights, the JSON config and the training state.

A run directory holds `checkpoint/`; it is replaced atomically (write a sibling, fsync, rename), so an
interrupted save leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from rltok.config import Config
from rltok.errors import UserError
from rltok.model import build_model

WEIGHTS, CONFIG, STATE = "model.safetensors", "config.json", "state.pt"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(run_dir: Path, model: nn.Module, cfg: Config, state: dict) -> Path:
    """Write run_dir/checkpoint atomically and return its path."""
    final, tmp, old = run_dir / "checkpoint", run_dir / "checkpoint.tmp", run_dir / "checkpoint.old"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    weights = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(weights, tmp / WEIGHTS)
    (tmp / CONFIG).write_text(cfg.to_json())
    torch.save(state, tmp / STATE)
    for name in (WEIGHTS, CONFIG, STATE):
        with open(tmp / name, "rb") as f:
            os.fsync(f.fileno())
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
    tmp.rename(final)
    _fsync_dir(run_dir)
    shutil.rmtree(old, ignore_errors=True)
    return final


def recover(run_dir: Path) -> None:
    """Finish a swap that a kill interrupted: the previous checkpoint is still whole in checkpoint.old."""
    old = run_dir / "checkpoint.old"
    if old.exists() and not (run_dir / "checkpoint").exists():
        old.rename(run_dir / "checkpoint")


def resolve(path: str | Path) -> Path:
    """The checkpoint directory for a run directory or a checkpoint directory."""
    path = Path(path)
    recover(path)
    if (path / "checkpoint" / CONFIG).exists():
        return path / "checkpoint"
    if (path / CONFIG).exists() and (path / WEIGHTS).exists():
        return path
    raise UserError(f"{path} holds no rltok checkpoint (no {CONFIG} and {WEIGHTS}); "
                    "point --checkpoint at a run directory written by `rltok train`")


def load_config(path: str | Path) -> Config:
    """The config stored with a checkpoint."""
    directory = resolve(path)
    try:
        raw = json.loads((directory / CONFIG).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UserError(f"{directory / CONFIG} is not valid JSON; the checkpoint is damaged") from None
    return Config.from_dict(raw).validate()


def load_weights(model: nn.Module, path: str | Path) -> None:
    """Load safetensors weights into a model of the matching config, or say why they do not fit."""
    directory = resolve(path)
    try:
        weights = load_file(directory / WEIGHTS)
    except (SafetensorError, OSError) as e:
        raise UserError(f"{directory / WEIGHTS} cannot be read ({e}); the checkpoint is damaged") from None
    try:
        model.load_state_dict(weights)
    except RuntimeError:
        raise UserError(f"the weights in {directory} do not fit the architecture in its {CONFIG}; "
                        "the checkpoint was written by another config or version") from None


def load(path: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """The model of a checkpoint, in eval mode, with its Config as `.config`."""
    cfg = load_config(path)
    model = build_model(cfg)
    load_weights(model, path)
    model.config = cfg
    return model.to(device).eval()


def load_state(path: str | Path) -> dict:
    """The training state (optimizer, RNG streams, step) saved with a checkpoint."""
    directory = resolve(path)
    try:
        return torch.load(directory / STATE, weights_only=True)
    except Exception as e:  # a truncated or foreign file: any unpickling error means the same thing
        raise UserError(f"{directory / STATE} cannot be read ({e.__class__.__name__}); "
                        "the checkpoint is damaged, start a fresh run") from None
