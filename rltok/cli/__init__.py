"""`rltok <command>`: train, eval, eval-downstream, segment, generate, inventory, export, compare,
data prepare, data shard, plot. One module per group of subcommands; each registers its parser and the
function that runs it."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from rltok.cli import plot, read, runs, train
from rltok.cli.common import rank
from rltok.errors import UserError


def parser() -> argparse.ArgumentParser:
    """The command line of `rltok`."""
    top = argparse.ArgumentParser(
        prog="rltok",
        description="Byte-level language models that learn "
        "their own tokenization with reinforcement learning.",
    )
    commands = top.add_subparsers(dest="command", required=True)
    train.add_parser(commands)
    read.add_parsers(commands)
    runs.add_parsers(commands)
    plot.add_parser(commands)
    return top


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rltok` command."""
    warnings.formatwarning = lambda message, category, *rest: f"rltok: warning: {message}\n"
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except UserError as e:
        from rltok.parallel import PeerFailure

        # the failed rank speaks for itself; rank 0 sums up
        if rank() == 0 or not isinstance(e, PeerFailure):
            print(f"rltok: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of our output closed early (`| head`): not an error
        sys.stdout = open(os.devnull, "w")
        return 0


def lm_eval_main() -> int:
    """Entry point of `rltok-lm-eval`: lm-eval's command line with the rltok model registered."""
    try:
        import rltok.downstream.harness  # noqa: F401  (registers the model)
    except UserError as e:
        print(f"rltok: error: {e}", file=sys.stderr)
        return 2
    from lm_eval.__main__ import cli_evaluate

    if "--model" not in sys.argv:
        sys.argv[1:1] = ["--model", "rltok"]
    cli_evaluate()
    return 0
