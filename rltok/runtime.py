"""Where and in what precision to run: the device and the autocast context."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch


def default_device() -> torch.device:
    """The first GPU if there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def bf16_is_fast(device: torch.device) -> bool:
    """True on GPUs and on CPUs with AVX-512 or AMX, where bf16 matrix work beats fp32."""
    if device.type == "cuda":
        return True
    capability = torch.backends.cpu.get_cpu_capability()
    return "AVX512" in capability or "AMX" in capability


def autocast(device: torch.device, precision: str) -> AbstractContextManager:
    """bf16 autocast for 'bf16' (or 'auto' where bf16 is fast); nothing for 'fp32'."""
    if precision == "fp32" or (precision == "auto" and not bf16_is_fast(device)):
        return nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)
