"""`rltok train`: its flags (built from the config fields that declare one) and the run."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import typing
from pathlib import Path

from rltok.cli.common import positive_float, positive_int, rank
from rltok.errors import UserError


# `rltok train` sets the config fields declared with rltok.config.flag: the flag's name and help live
# on the field, so adding a field with a flag is all it takes to reach it from the command line
def _config_flags() -> list[tuple[str, dataclasses.Field, type]]:
    """(dotted path of the field's section in Config, field, its type) for each config field that
    has a `rltok train` flag, sub-sections (the RL policy's parts) included."""
    from rltok.config import BoundaryConfig, LossWeights, TrainConfig

    found = []

    def walk(path: str, cls: type) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if "flag" in f.metadata:
                found.append((path, f, hints[f.name]))
            elif dataclasses.is_dataclass(hints[f.name]):
                walk(f"{path}.{f.name}", hints[f.name])

    for path, cls in {
        "boundaries": BoundaryConfig,
        "loss": LossWeights,
        "train": TrainConfig,
    }.items():
        walk(path, cls)
    return found


def _section(cfg: object, path: str) -> object:
    """The config section at a dotted path of section names, from Config down."""
    for name in path.split("."):
        cfg = getattr(cfg, name)
    return cfg


def _dest(f: dataclasses.Field) -> str:
    """Where argparse stores a config field's flag: its dest, else argparse's own name for it."""
    return f.metadata.get("dest") or f.metadata["flag"].removeprefix("--").replace("-", "_")


def _add_config_flag(parser: argparse._ActionsContainer, f: dataclasses.Field, kind: type) -> None:
    """Add a config field's flag; its default None keeps the preset's value."""
    meta = f.metadata
    kwargs = {key: meta[key] for key in ("help", "metavar", "choices") if key in meta}
    if kind is bool:  # a switch: --no-X sets the field to False, any other flag sets it to True
        kwargs.update(action="store_const", const=not meta["flag"].startswith("--no-"))
    else:
        kwargs["type"] = (
            {int: positive_int, float: positive_float}[kind] if meta.get("positive") else kind
        )
    parser.add_argument(meta["flag"], *meta.get("aliases", ()), dest=_dest(f), **kwargs)


def add_parser(commands: argparse._SubParsersAction) -> None:
    """The train subcommand: recipes first, then the config's own flags."""
    from rltok.boundaries import METHODS
    from rltok.config import PRESETS
    from rltok.model import REFERENCE_MODELS
    from rltok.recipes import RECIPES
    from rltok.tracking import TRACKERS

    train = commands.add_parser(
        "train",
        help="train a model",
        description="Learner recipes (--recipe NAME; each also as NAME-prior-only, its policy "
        "loss off):\n" + "\n".join(f"  {r.name:<20} {r.purpose}" for r in RECIPES.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument(
        "--recipe",
        metavar="NAME",
        help="a learner recipe, listed above (rl boundaries; the flags below override its settings)",
    )
    train.add_argument(
        "--preset", default="tiny", choices=list(PRESETS), help="model and schedule sizes"
    )
    train.add_argument(
        "--data",
        help="text file, folder of text files, or .jsonl with a text field "
        "(default: the embedded Shakespeare corpus)",
    )
    train.add_argument(
        "--out", help="run directory (default: runs/<preset>-<recipe or boundaries>)"
    )
    train.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its checkpoint"
    )
    train.add_argument(
        "--boundaries", choices=[*METHODS, *REFERENCE_MODELS], help="boundary method (default rl)"
    )
    budget = train.add_mutually_exclusive_group()  # --max-steps or --max-bytes
    for _, f, kind in _config_flags():
        _add_config_flag(budget if f.name == "max_steps" else train, f, kind)
        if f.name == "max_steps":  # right after it, so that the usage line shows the choice
            budget.add_argument(
                "--max-bytes", type=positive_int, help="training bytes; sets the step count"
            )
    train.add_argument(
        "--time-limit",
        type=positive_float,
        metavar="SECONDS",
        help="stop after this long; the learning-rate schedule ends on time",
    )
    train.add_argument(
        "--compile",
        action="store_true",
        help="compile each transformer block with torch.compile "
        "(GPU speed; needs a C++ compiler on CPU)",
    )
    train.add_argument(
        "--fsdp",
        action="store_true",
        help="under torchrun, shard weights, gradients and optimizer "
        "state with FSDP2 instead of replicating them with DDP",
    )
    train.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: a GPU if there is one)")
    train.add_argument(
        "--peak-tflops",
        type=positive_float,
        metavar="TFLOPS",
        help="the device's dense bf16 peak, for the logged utilisation (default: rltok.flops's table)",
    )
    train.add_argument(
        "--log-to",
        nargs="+",
        action="extend",
        choices=["jsonl", *TRACKERS],
        metavar="TRACKER",
        help="also log every metrics.jsonl record to tensorboard and/or wandb "
        "(pip install 'rltok[track]'); metrics.jsonl is always written",
    )
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.set_defaults(run=run)


def config_from_args(args: argparse.Namespace):
    from rltok.config import preset
    from rltok.recipes import recipe

    cfg = preset(args.preset)
    b, t = cfg.boundaries, cfg.train
    if args.recipe is not None:
        if args.boundaries not in (None, "rl"):
            raise UserError(
                f"--recipe {args.recipe} is a learner of rl boundaries, not {args.boundaries}; "
                "drop one of the two"
            )
        recipe(args.recipe).apply(cfg)
    if args.boundaries is not None:
        b.method = args.boundaries
    given = set()
    for section, f, _ in _config_flags():
        value = getattr(args, _dest(f))
        if value is not None:  # None: the flag was not given, the preset's value stays
            setattr(_section(cfg, section), f.name, value)
            given.add(f"{section.removeprefix('boundaries.')}.{f.name}")
    cfg.check_given(given)
    if args.max_bytes is not None:
        t.max_steps = math.ceil(args.max_bytes / (t.batch_size * t.seq_len))
    return cfg.validate()


def run(args: argparse.Namespace) -> int:
    """Train, or resume, and print the summary."""
    from rltok.checkpoint import run_config
    from rltok.data import load_corpus
    from rltok.train import train

    cfg = config_from_args(args)
    out = Path(args.out or f"runs/{cfg.preset}-{args.recipe or cfg.boundaries.method}")
    if args.resume:
        # the run's own config wins; only the budget may be extended
        saved = run_config(out)
        saved.train.max_steps = (
            cfg.train.max_steps if (args.max_steps or args.max_bytes) else saved.train.max_steps
        )
        cfg = saved
    corpus = load_corpus(args.data)
    main_rank = rank() == 0
    if main_rank:
        print(
            f"rltok: {cfg.preset} preset, {cfg.boundaries.method} boundaries, {cfg.train.max_steps} steps; "
            f"{corpus.describe()}; writing {out}",
            file=sys.stderr,
        )
    summary = train(
        cfg,
        corpus,
        out,
        resume=args.resume,
        time_limit=args.time_limit,
        device=args.device,
        progress=False if args.quiet else None,
        fsdp=args.fsdp,
        compile=args.compile,
        peak_tflops=args.peak_tflops,
        log_to=tuple(name for name in args.log_to or () if name != "jsonl"),
    )
    if summary["interrupted"]:
        return 130
    if main_rank:
        print(
            json.dumps(
                {
                    k: summary[k]
                    for k in ("step", "bytes", "elapsed", "bytes_per_s", "val_bpb", "checkpoint")
                    if k in summary
                }
            )
        )
    return 0
