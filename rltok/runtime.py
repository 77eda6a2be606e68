"""Where and in what precision to run: the device and the autocast context."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch


def seed_of(*parts: int) -> int:
    """A 48-bit seed that is a fixed function of the integers given: Python hashes a tuple of ints
    alike in every process and run, so a draw keyed by them is reproducible anywhere."""
    return hash(parts) & 0xFFFF_FFFF_FFFF


def default_device() -> torch.device:
    """The first GPU if there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def bf16_is_fast(device: torch.device) -> bool:
    """True on GPUs and on CPUs with AVX-512 or AMX, where bf16 matrix work beats fp32."""
    if device.type == "cuda":
        return True
    capability = torch.backends.cpu.get_cpu_capability()
    return "AVX512" in capability or "AMX" in capability


def uses_bf16(device: torch.device, precision: str) -> bool:
    """Whether a run of this precision computes in bf16 here: 'bf16', or 'auto' where bf16 is fast."""
    return precision == "bf16" or (precision == "auto" and bf16_is_fast(device))


def autocast(device: torch.device, precision: str) -> AbstractContextManager:
    """bf16 autocast where the run computes in bf16 (`uses_bf16`); nothing for 'fp32'."""
    if not uses_bf16(device, precision):
        return nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)
