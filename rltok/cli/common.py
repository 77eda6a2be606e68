"""What the subcommands share: number types, the options every command that reads a trained model
takes (as argparse parents), and the process's rank under torchrun."""

from __future__ import annotations

import argparse
import os

# a model trained on its policy's mode is read greedily whether or not this is given
GREEDY_HELP = "boundaries where p > 0.5 instead of sampled (always, for a greedy-trained model)"


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number above 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def options(*names: str) -> argparse.ArgumentParser:
    """A parent parser with the shared options named: checkpoint, device, sampling (--greedy and
    --seed), json."""
    parent = argparse.ArgumentParser(add_help=False)
    if "checkpoint" in names:
        parent.add_argument(
            "--checkpoint", required=True, help="run directory, checkpoint directory or export"
        )
    if "sampling" in names:
        parent.add_argument("--greedy", action="store_true", help=GREEDY_HELP)
        parent.add_argument("--seed", type=int, default=0, help="seed of the sampled boundaries")
    if "json" in names:
        parent.add_argument("--json", action="store_true", help="print JSON")
    if "device" in names:
        parent.add_argument("--device", help="cpu, cuda, ... (default: cpu)")
    return parent


def rank() -> int:
    """This process's rank under torchrun (0 without it)."""
    return int(os.environ.get("RANK", "0"))
