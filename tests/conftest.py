import pytest
import torch

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
