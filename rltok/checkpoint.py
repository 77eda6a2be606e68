"""Checkpoints: directories `run/checkpoints/step-NNNNNNNN/` holding safetensors weights, the JSON
config, the training state and a manifest of sha256 checksums.

Each one is written to a hidden sibling, fsynced and renamed into place, so a crash or a full disk
never leaves a half-written checkpoint under a real name; the newest few are kept, and a damaged one
(its checksums do not match) is skipped in favour of the one before it, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path

import torch
from safetensors.torch import save_file

from rltok.config import Config
from rltok.errors import UserError
from rltok.pretrained import CONFIG, WEIGHTS, PretrainedModel, load_directory, read_config

STATE, MANIFEST = "state.pt", "manifest.json"
CHECKPOINTS = "checkpoints"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _step_dirs(run_dir: Path) -> list[Path]:
    """The run's checkpoint directories, newest first."""
    root = run_dir / CHECKPOINTS
    found = (
        [p for p in root.glob("step-*") if p.is_dir() and p.name[5:].isdigit()]
        if root.is_dir()
        else []
    )
    return sorted(found, key=lambda p: int(p.name[5:]), reverse=True)


def damage(directory: Path) -> str | None:
    """Why a checkpoint directory cannot be trusted, or None when every checksum matches."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{MANIFEST} is missing or unreadable"
    for name in (WEIGHTS, CONFIG, STATE):
        try:
            if _sha256(directory / name) != files.get(name):
                return f"{name} does not match its checksum"
        except OSError:
            return f"{name} is missing"
    return None


def save_checkpoint(
    run_dir: Path, weights: dict[str, torch.Tensor], cfg: Config, state: dict, keep: int
) -> Path:
    """Write run_dir/checkpoints/step-N (the CPU `weights`, the config, the training state) atomically,
    keep the newest `keep`, and return its path.
    On a write error (a full disk) nothing is left half-written and UserError names the checkpoint
    that is still intact."""
    root = run_dir / CHECKPOINTS
    final = root / f"step-{state['step']:08d}"
    tmp = root / f".{final.name}.tmp"
    try:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        save_file({k: v.contiguous() for k, v in weights.items()}, tmp / WEIGHTS)
        (tmp / CONFIG).write_text(cfg.to_json())
        torch.save(state, tmp / STATE)
        files = {name: _sha256(tmp / name) for name in (WEIGHTS, CONFIG, STATE)}
        (tmp / MANIFEST).write_text(json.dumps({"step": state["step"], "files": files}, indent=1))
        for name in (WEIGHTS, CONFIG, STATE, MANIFEST):
            _fsync(tmp / name)
        if final.exists():  # a damaged checkpoint of the same step, set aside on resume, or a rerun
            shutil.rmtree(final)
        tmp.rename(final)
        _fsync(root)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        previous = next((p for p in _step_dirs(run_dir) if p != final), None)
        kept = (
            f"the previous checkpoint {previous} is intact"
            if previous
            else "no earlier checkpoint exists"
        )
        raise UserError(
            f"could not write the checkpoint of step {state['step']} ({e.strerror or e}); "
            f"{kept}; free disk space and resume with --resume"
        ) from None
    for old in _step_dirs(run_dir)[keep:]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest(run_dir: Path, set_aside: bool = False) -> Path | None:
    """The newest checkpoint of a run whose checksums match, warning about each damaged one skipped;
    `set_aside` renames the damaged ones to *.damaged so that a resumed run does not meet them again."""
    for directory in _step_dirs(run_dir):
        reason = damage(directory)
        if reason is None:
            return directory
        if set_aside:
            directory.rename(directory.with_name(directory.name + ".damaged"))
        warnings.warn(
            f"checkpoint {directory} is damaged: {reason}; falling back to an earlier one"
        )
    return None


def set_aside_checkpoints(run_dir: Path) -> list[Path]:
    """The checkpoint directories that `latest(set_aside=True)` renamed as damaged."""
    return sorted((run_dir / CHECKPOINTS).glob("step-*.damaged"))


def resolve(path: str | Path) -> Path:
    """The checkpoint directory for a run directory (its newest good checkpoint) or a checkpoint directory."""
    path = Path(path)
    if (path / WEIGHTS).exists() and (path / CONFIG).exists() and not (path / STATE).exists():
        return path  # an export of save_pretrained: no training state, no manifest
    if (path / MANIFEST).exists() or (path / WEIGHTS).exists():
        reason = damage(path)
        if reason is not None:
            raise UserError(
                f"the checkpoint {path} is damaged ({reason}); use an earlier one in {path.parent}"
            )
        return path
    found = latest(path)
    if found is not None:
        return found
    if _step_dirs(path):
        raise UserError(
            f"every checkpoint in {path / CHECKPOINTS} is damaged; the run must start again"
        )
    raise UserError(
        f"{path} holds no rltok checkpoint; point --checkpoint at a run directory written by "
        "`rltok train` or at one of its checkpoints/step-* directories"
    )


def load_config(path: str | Path) -> Config:
    """The config stored with a checkpoint (or the newest good checkpoint of a run directory)."""
    return read_config(resolve(path))


def run_config(run_dir: str | Path) -> Config:
    """The config a run directory was started with."""
    path = Path(run_dir) / CONFIG
    if not path.exists():
        raise UserError(f"{run_dir} holds no run to resume; drop --resume to start a fresh run")
    return read_config(Path(run_dir))


def load(path: str | Path, device: str | torch.device = "cpu") -> PretrainedModel:
    """The model of a run directory, a checkpoint or a save_pretrained export, in eval mode, with its
    Config as `.config`."""
    return load_directory(resolve(path)).to(device)


def load_state(directory: Path) -> dict:
    """The training state (optimizer, RNG streams, step) saved in a checkpoint directory."""
    try:
        return torch.load(directory / STATE, weights_only=True)
    except Exception as e:  # a truncated or foreign file: any unpickling error means the same thing
        raise UserError(
            f"{directory / STATE} cannot be read ({e.__class__.__name__}); "
            "the checkpoint is damaged, start a fresh run"
        ) from None
