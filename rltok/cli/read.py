"""The subcommands that read a trained model: eval, eval-downstream, segment, generate, inventory,
export. They share --checkpoint and --device, and (where boundaries are drawn) --greedy and --seed."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from rltok.cli.common import GREEDY_HELP, options, positive_int
from rltok.errors import UserError


def add_parsers(commands: argparse._SubParsersAction) -> None:
    """The subcommands that read a trained model, with the options they share."""
    model, sampling, json_ = options("checkpoint", "device"), options("sampling"), options("json")
    checkpoint = options("checkpoint")  # read on the CPU
    _add_eval(commands, [model, sampling, json_])
    _add_eval_downstream(commands, [model, sampling, json_])
    _add_segment(commands, [checkpoint, sampling])
    _add_generate(commands, [model, json_])
    _add_inventory(commands, [checkpoint, sampling, json_])
    _add_export(commands, [checkpoint])


def _add_eval(commands: argparse._SubParsersAction, parents: list) -> None:
    ev = commands.add_parser(
        "eval",
        parents=parents,
        help="bits per byte and boundary statistics on held-out documents",
    )
    ev.add_argument(
        "--data", help="corpus whose test split to score (default: the embedded corpus)"
    )
    ev.add_argument("--split", default="test", choices=["test", "val"], help="which held-out split")
    ev.add_argument(
        "--max-bytes",
        type=positive_int,
        help="score about N bytes: the same leading share of every document",
    )
    ev.set_defaults(run=run_eval)


def _add_eval_downstream(commands: argparse._SubParsersAction, parents: list) -> None:
    down = commands.add_parser(
        "eval-downstream",
        parents=parents,
        help="zero-shot multiple choice: accuracy and the bits per byte of the right answer",
    )
    down.add_argument(
        "--tasks",
        default="agreement",
        help="comma-separated task names or .jsonl files "
        "(default: agreement, built in; `rltok data prepare bigbench` adds more)",
    )
    down.add_argument(
        "--limit", type=positive_int, help="score only the first N items of each task"
    )
    down.add_argument(
        "--samples",
        type=positive_int,
        default=1,
        help="boundary samples to average each log-likelihood over (default 1)",
    )
    down.add_argument(
        "--batch-size", type=positive_int, help="sequences per forward pass (default: the run's)"
    )
    down.add_argument(
        "--cache",
        help="where prepared tasks are (default: $RLTOK_DATA, else ~/.cache/rltok/corpora)",
    )
    down.set_defaults(run=run_eval_downstream)


def _add_segment(commands: argparse._SubParsersAction, parents: list) -> None:
    seg = commands.add_parser(
        "segment",
        parents=parents,
        help="show where a model ends its chunks",
    )
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
    seg.add_argument(
        "--max-bytes", type=positive_int, default=1 << 16, help="segment at most this many bytes"
    )
    seg.set_defaults(run=run_segment)


def _add_generate(commands: argparse._SubParsersAction, parents: list) -> None:
    gen = commands.add_parser(
        "generate",
        parents=parents,
        help="sample text from a trained model (cached, batched, boundaries decided online)",
    )
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
    gen.add_argument("--greedy-boundaries", action="store_true", help=GREEDY_HELP)
    gen.add_argument("--seed", type=int, default=0, help="seed of the sampled bytes and boundaries")
    gen.add_argument(
        "--show-boundaries", action="store_true", help="mark chunk ends with | as they are decided"
    )
    gen.set_defaults(run=run_generate)


def _add_inventory(commands: argparse._SubParsersAction, parents: list) -> None:
    inv = commands.add_parser(
        "inventory",
        parents=parents,
        help="the token inventory a model learned, read off a corpus",
    )
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
    inv.add_argument(
        "--top", type=positive_int, default=20, help="most frequent chunks to list (default 20)"
    )
    inv.add_argument(
        "--max-bytes",
        type=positive_int,
        help="read about N bytes: the same leading share of every document",
    )
    inv.add_argument(
        "--no-bpe", action="store_true", help="skip the overlap with a BPE (it trains one)"
    )
    inv.add_argument("--png", help="write the chunk-length histogram here")
    inv.set_defaults(run=run_inventory)


def _add_export(commands: argparse._SubParsersAction, parents: list) -> None:
    exp = commands.add_parser(
        "export",
        parents=parents,
        help="write a checkpoint as a portable Hugging Face Hub directory",
    )
    exp.add_argument(
        "--out", required=True, help="directory for model.safetensors, config.json and README.md"
    )
    exp.add_argument(
        "--push-to-hub", metavar="REPO_ID", help="also upload it (needs a network and a token)"
    )
    exp.set_defaults(run=run_export)


def run_eval(args: argparse.Namespace) -> int:
    """Score a held-out split."""
    from rltok.checkpoint import load
    from rltok.data import load_corpus
    from rltok.evaluate import evaluate

    model = load(args.checkpoint, device=args.device or "cpu")
    cfg = model.config
    corpus = load_corpus(args.data)
    scores = evaluate(
        model,
        getattr(corpus, args.split),
        cfg.train.seq_len,
        cfg.train.batch_size,
        greedy=args.greedy or model.boundary_method.reads_greedily,
        max_bytes=args.max_bytes,
        seed=args.seed,
        precision=cfg.train.precision,
        gold=corpus.gold_of(args.split),
    )
    if args.json:
        print(json.dumps(scores))
    else:
        for key, value in scores.items():
            print(f"{key:22s} {value:.4f}" if isinstance(value, float) else f"{key:22s} {value}")
    return 0


def run_eval_downstream(args: argparse.Namespace) -> int:
    """Score multiple-choice tasks zero-shot."""
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


def run_segment(args: argparse.Namespace) -> int:
    """Show where one model, or several side by side, end their chunks."""
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
    """The prompts: --prompt, or one per line of --prompt-file."""
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


def run_generate(args: argparse.Namespace) -> int:
    """Generate from one prompt (streamed) or a file of prompts (one batch)."""
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


def run_inventory(args: argparse.Namespace) -> int:
    """The chunks one model, or several, draw over a corpus split."""
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


def run_export(args: argparse.Namespace) -> int:
    """Write a checkpoint in the Hub layout, and upload it if asked."""
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
