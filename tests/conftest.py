import os

import pytest
import torch
from hypothesis import settings

from rltok.cli import main

from rltok.config import preset
from rltok.model import build_model


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)


def smoke_model(method: str = "rl", **boundary_fields):
    """A smoke-sized model whose policy head is randomised, so boundaries depend on content."""
    cfg = preset("smoke")
    cfg.boundaries.method = method
    for name, value in boundary_fields.items():
        setattr(cfg.boundaries, name, value)
    model = build_model(cfg.validate())
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
    return max((p for p in (run / "checkpoints").glob("step-*") if p.name[5:].isdigit()), key=lambda p: p.name)


# CI explores the same examples every run, so a landing never hinges on a lucky draw;
# HYPOTHESIS_PROFILE=explore searches fresh ones (run it when touching the model).
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
