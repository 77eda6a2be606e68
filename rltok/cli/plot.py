"""`rltok plot`: runs' validation curves side by side, or one text's segmentation, as a picture."""

from __future__ import annotations

import argparse
from pathlib import Path

from rltok.cli.common import options
from rltok.errors import UserError


def add_parser(commands: argparse._SubParsersAction) -> None:
    """The plot subcommand."""
    plot = commands.add_parser(
        "plot",
        parents=[options("sampling")],
        help="draw runs' curves, or a text's segmentation, as a PNG",
        description="rltok plot RUN [RUN ...] --out curves.png: validation bits per byte, rate and "
        "policy entropy against training bytes (--x flops: FLOPs), one line per run. "
        "rltok plot --segmentation RUN --text TEXT --out seg.png: the text with its chunk ends "
        "and boundary probabilities.",
    )
    plot.add_argument("runs", nargs="*", metavar="RUN", help="run directories to draw curves of")
    plot.add_argument("--out", required=True, help="the picture to write (.png)")
    plot.add_argument("--x", default="bytes", choices=["bytes", "flops"], help="the curves' x axis")
    plot.add_argument(
        "--segmentation", metavar="RUN", help="a run or checkpoint: draw its segmentation of --text"
    )
    plot.add_argument("--text", help="the text to segment (with --segmentation)")
    plot.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Write the picture and say where."""
    from rltok import plots

    out = Path(args.out)
    if not out.parent.is_dir():
        raise UserError(f"{out.parent} is not a directory; pass an --out in an existing one")
    if args.segmentation is not None:
        if args.runs or not args.text:
            raise UserError(
                "--segmentation draws one run's segmentation of --text: give --text, and no RUN"
            )
        from rltok.checkpoint import load
        from rltok.segment import segment

        model = load(args.segmentation)
        greedy = args.greedy or model.boundary_method.reads_greedily
        seg = segment(model, args.text, greedy=greedy, seed=args.seed)
        plots.segmentation_picture(seg, out, Path(args.segmentation).name)
    elif not args.runs:
        raise UserError("name the run directories to plot (or --segmentation RUN --text TEXT)")
    else:
        plots.curves([Path(r) for r in args.runs], out, x=args.x)
    print(out)
    return 0
