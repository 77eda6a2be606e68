import functools
import os

import pytest
import torch
from hypothesis import settings

from rltok.bpe import StoredBPE, train_bpe
from rltok.cli import main
from rltok.config import BoundaryConfig, preset, set_setting
from rltok.data import embedded_corpus
from rltok.pretrained import build_model


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)


@functools.cache
def small_bpe(vocab_size: int = 1024):
    """A BPE trained on a slice of the embedded corpus (seconds, cached)."""
    return train_bpe(embedded_corpus().train[:3], vocab_size)


def boundary_config(settings: dict | None = None) -> BoundaryConfig:
    """A BoundaryConfig with settings given by dotted path ({"prior.weight": 0.0})."""
    cfg = BoundaryConfig()
    for path, value in (settings or {}).items():
        set_setting(cfg, path, value)
    return cfg


def smoke_model(method: str = "rl", settings: dict | None = None):
    """A smoke-sized model whose policy head is randomised, so boundaries depend on content; methods
    that read BPE tokens get a small trained BPE. `settings`: boundary settings by dotted path."""
    cfg = preset("smoke")
    cfg.boundaries = boundary_config({**(settings or {}), "method": method})
    if cfg.reads_bpe:
        cfg.boundaries.bpe_vocab = small_bpe().vocab_size
    model = build_model(cfg.validate())
    for module in model.modules():
        if isinstance(module, StoredBPE):
            module.store(small_bpe())
    for p in model.boundary.parameters() if hasattr(model, "boundary") else []:
        torch.nn.init.normal_(p, std=1.0)
    return model.eval()


SMOKE = ["train", "--preset", "smoke", "--quiet"]


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One 20-step smoke run shared by the tests that only read it."""
    out = tmp_path_factory.mktemp("runs") / "smoke"
    assert main([*SMOKE, "--out", str(out)]) == 0
    return out


def newest_checkpoint(run):
    """The highest-step checkpoint directory of a run."""
    return max(
        (p for p in (run / "checkpoints").glob("step-*") if p.name[5:].isdigit()),
        key=lambda p: p.name,
    )


# CI explores the same examples every run, so a landing never hinges on a lucky draw;
# HYPOTHESIS_PROFILE=explore searches fresh ones (run it when touching the model).
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
