"""Boundary methods behind one interface; `make` builds one by name (the `--boundaries` flag)."""

from __future__ import annotations

from rltok.boundaries.base import (
    NO_BOUNDARIES,
    BoundaryMethod,
    Decision,
    NoBoundaries,
    mode_noise,
)
from rltok.boundaries.bpe import BPEBoundaries
from rltok.boundaries.rl import RLPolicy
from rltok.boundaries.rules import (
    CharBoundaries,
    EntropyBoundaries,
    GoldBoundaries,
    GoldEndBoundaries,
    StrideBoundaries,
    UniformBoundaries,
    WhitespaceBoundaries,
    WordStartBoundaries,
)
from rltok.boundaries.ste import HNetBoundaries, NawrotBoundaries
from rltok.config import BoundaryConfig
from rltok.errors import UserError

METHODS: dict[str, type[BoundaryMethod]] = {
    "rl": RLPolicy,
    "uniform": UniformBoundaries,
    "stride": StrideBoundaries,
    "whitespace": WhitespaceBoundaries,
    "word-start": WordStartBoundaries,
    "entropy": EntropyBoundaries,
    "char": CharBoundaries,
    "gold": GoldBoundaries,
    "gold-end": GoldEndBoundaries,
    "bpe": BPEBoundaries,
    "nawrot": NawrotBoundaries,
    "hnet": HNetBoundaries,
}


def make(d_model: int, cfg: BoundaryConfig) -> BoundaryMethod:
    """The boundary method named by cfg.method."""
    if cfg.method not in METHODS:
        raise UserError(
            f"unknown boundary method {cfg.method!r}; choose one of: {', '.join(METHODS)}"
        )
    return METHODS[cfg.method](d_model, cfg)


__all__ = [
    "BoundaryMethod",
    "Decision",
    "METHODS",
    "NO_BOUNDARIES",
    "NoBoundaries",
    "make",
    "mode_noise",
]
