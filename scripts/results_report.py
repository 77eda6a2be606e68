"""Write docs/RESULTS.md from the runs of scripts/results_suite.sh (finished runs only, so it can be
rerun while the suite is still going). Usage: python scripts/results_report.py [OUT_BASE] [--docs DIR]
[--parts english-paper,...] [--downstream-only] (--parts rewrites only the named suites' sections and keeps
the others as RESULTS.md has them; --downstream-only refreshes only the downstream tables)

Copies each run's small files (test_eval.json, metrics.jsonl, config.json) under docs/results/, redraws
the plots from them, segments the same passages with every method, and writes the tables and a
reading generated from the numbers next to the paper's (docs/method.md, "The paper's numbers"). The interpretation in
docs/results/reading.md is written by hand from those tables and placed after the introduction.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from rltok.checkpoint import load
from rltok.compare import (
    aggregate,
    aggregate_downstream,
    downstream_table,
    markdown_table,
    paired,
    paired_section,
    plot,
)
from rltok.compare.suites import SUITES
from rltok.data import load_corpus, split_hashes
from rltok.segment import segment, to_plain

PARTS = {  # folder under OUT_BASE: (corpus, title)
    "english-paper": ("english", "Every method on the English corpus"),
    "english-ablations": ("english", "RL ablations on the English corpus"),
    "code": ("code", "The RL policies and H-Net on Python code"),
}
# the paper's 147M models on FineWeb (test bits per byte), and its 40M ablations
PAPER_FINEWEB = {
    "rl": 1.280,
    "rl-w8": 1.297,
    "bpe": 1.299,
    "nawrot": 1.372,
    "uniform": 1.376,
    "hnet": 1.386,
}
PAPER_ABLATIONS = {  # validation bpb / rate / whitespace recall
    "rl": (1.548, 0.196, 0.99),
    "rl-gamma1": (1.542, 0.215, 0.41),
    "rl-no-batch-relative": (1.543, 0.208, 0.99),
    "rl-no-early-exit": (1.562, 0.200, 0.72),
    "rl-no-rate-loss": (None, 1.0, None),
}
PAPER_CODE = {"rl": 0.568, "hnet": 0.769}
# (test document, first byte, bytes): a Shakespeare play, a Wikipedia page, a Bible book; a sympy module
PASSAGES = {
    "english": [(0, 20_000, 260), (10, 3_000, 260), (22, 1_000, 260)],
    "code": [(0, 0, 300)],
}


def finished_runs(part: Path) -> list[dict]:
    """test_eval.json of every finished run, in suite order (whichever `rltok compare` calls made them)."""
    runs = [json.loads(p.read_text()) for p in sorted((part / "runs").glob("*/test_eval.json"))]
    rank = {entry.name: i for i, entry in enumerate(SUITES["all"])}
    return sorted(runs, key=lambda r: (rank.get(r["name"], len(rank)), r["name"], r["seed"]))


def copy_small_files(part: Path, dest: Path) -> None:
    """The files a reader needs to check a number, without the checkpoints."""
    for run in sorted((part / "runs").glob("*/test_eval.json")):
        target = dest / "runs" / run.parent.name
        target.mkdir(parents=True, exist_ok=True)
        for name in ("test_eval.json", "metrics.jsonl", "config.json", "downstream.json"):
            if (run.parent / name).exists():
                shutil.copy2(run.parent / name, target / name)


def _line_cut(data: bytes, start: int, size: int) -> bytes:
    """About `size` bytes from `start`, beginning and ending at a line break."""
    begin = data.rfind(b"\n", 0, start) + 1
    end = data.find(b"\n", begin + size)
    return data[begin : end if end > 0 else begin + size]


def passages(part: Path, rows: list[dict], corpus) -> list[str]:
    """Each passage segmented by the first seed of every method, chunks separated by |."""
    lines = []
    for doc, start, size in PASSAGES[corpus.name]:
        text = _line_cut(corpus.test[doc], start, size)
        lines += [f"Test document {doc}, from byte {start}:", "", "```"]
        for row in rows:
            run = part / "runs" / f"{row['name']}-s{row['seeds'][0]}"
            if row["method"] == "flat" or not (run / "checkpoints").exists():
                continue
            chunks = to_plain(segment(load(run), text, seed=0)).replace("\n", "⏎")
            lines.append(f"{row['name']:>22}  {chunks}")
        lines += ["```", ""]
    return lines


def _rank(rows: list[dict], names) -> list[str]:
    return [
        r["name"] for r in sorted((r for r in rows if r["name"] in names), key=lambda r: r["bpb"])
    ]


def reading(name: str, rows: list[dict]) -> list[str]:
    """Sentences computed from the table: ranking, ties, off-rate rows, and the paper's ordering."""
    by = {r["name"]: r for r in rows}
    out = [
        "Ranking by test bits per byte (lower is better): "
        + ", ".join(f"{r['name']} {r['bpb']:.4f}" for r in sorted(rows, key=lambda r: r["bpb"]))
        + "."
    ]
    ref = next((r["reference"] for r in rows if "reference" in r), None)
    if ref is not None:
        ties = [r["name"] for r in rows if r.get("vs_reference") == "tie"]
        better = [r["name"] for r in rows if r.get("vs_reference") == f"{ref} better"]
        worse = [r["name"] for r in rows if r.get("vs_reference") == f"{ref} worse"]
        unknown = [r["name"] for r in rows if r.get("vs_reference") == "no spread"]
        out.append(
            f"Against {ref} (a gap under twice the larger seed spread is a tie): {ref} is better than "
            f"{', '.join(better) or 'none'}; worse than {', '.join(worse) or 'none'}; tied with "
            f"{', '.join(ties) or 'none'}"
            + (
                f"; one seed on both sides, so not decided: {', '.join(unknown)}."
                if unknown
                else "."
            )
        )
    off = [f"{r['name']} ({r['rate']:.3f})" for r in rows if r["off_rate"]]
    if off:
        out.append(
            f"Off the target rate by more than 0.02, so their bpb is not a like-for-like comparison: "
            f"{', '.join(off)}."
        )
    if name == "english-paper":
        shared = [n for n in PAPER_FINEWEB if n in by]
        ours, theirs = _rank(rows, shared), sorted(shared, key=PAPER_FINEWEB.get)
        out.append(
            f"The paper's order of these methods (147M, FineWeb): {' < '.join(theirs)}; here: "
            f"{' < '.join(ours)} ({'the same' if ours == theirs else 'different'})."
        )
    if name == "english-ablations":
        for n, (_bpb, rate, recall) in PAPER_ABLATIONS.items():
            if n in by:
                r = by[n]
                out.append(
                    f"{n}: here rate {r['rate']:.3f}, whitespace recall {r['whitespace_recall']:.2f}; "
                    f"paper (40M) rate {rate}, recall {recall if recall is not None else '-'}."
                )
    if name == "code" and {"rl", "hnet"} <= by.keys():
        gap = by["hnet"]["bpb"] - by["rl"]["bpb"]
        out.append(
            f"rl {by['rl']['bpb']:.4f} vs hnet {by['hnet']['bpb']:.4f} (hnet minus rl: {gap:+.4f}); "
            f"paper (90M): rl {PAPER_CODE['rl']} vs hnet {PAPER_CODE['hnet']}."
        )
    return out


def paired_runs(runs: list[dict]) -> list[str]:
    """compare's paired table for the learned rows whose prior-only row the part also ran."""
    pairs = paired(runs, [(e.prior_of, e.name) for e in SUITES["all"] if e.prior_of])
    return [paired_section(pairs)] if pairs else []


def downstream(part: Path, runs: list[dict]) -> list[str]:
    """The downstream table of a suite folder: the tasks every finished run was scored on, if any."""
    scored = []
    for run in runs:
        path = part / "runs" / f"{run['name']}-s{run['seed']}" / "downstream.json"
        if path.exists():
            scored.append({**run, "downstream": json.loads(path.read_text())})
    tasks = (
        [t for t in scored[0]["downstream"] if all(t in r["downstream"] for r in scored)]
        if scored
        else []
    )
    if not tasks:
        return []
    items = ", ".join(f"{t} {scored[0]['downstream'][t]['items']}" for t in tasks)
    names = ", ".join(f"{r['name']}-s{r['seed']}" for r in scored)
    return [
        "### Downstream, zero-shot",
        "",
        f"`rltok eval-downstream` on each run (items per task: {items}; chance 0.5, social_iqa 0.33): "
        f"the bits per byte of the right answer (the paper's downstream metric) and, in brackets, "
        f"the accuracy, averaged over seeds. Runs scored ({len(scored)}, their scores in "
        f"`results/{part.name}/runs/*/downstream.json`): {names}.",
        "",
        downstream_table(aggregate_downstream(scored, tasks), tasks),
    ]


def refresh_downstream(base: Path, docs: Path) -> None:
    """Replace (or insert) each part's downstream table in RESULTS.md, before its passages."""
    text = (docs / "RESULTS.md").read_text()
    for name, (_, title) in PARTS.items():
        part = base / name
        lines = downstream(part, finished_runs(part)) if (part / "runs").exists() else []
        start = text.index(f"## {title}\n")
        end = text.index("### What the boundaries look like", start)
        old = text.find("### Downstream, zero-shot", start, end)
        section = "\n".join(lines) + "\n" if lines else ""
        text = text[: old if old >= 0 else end] + section + text[end:]
        for run in sorted((part / "runs").glob("*/downstream.json")) if lines else []:
            target = docs / "results" / name / "runs" / run.parent.name
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(run, target / "downstream.json")
    (docs / "RESULTS.md").write_text(text)


def kept_section(text: str, name: str) -> list[str]:
    """A part's section as RESULTS.md has it (up to the next part's heading), for parts not rewritten."""
    titles = [f"## {title}\n" for _, title in PARTS.values()]
    start = text.find(f"## {PARTS[name][1]}\n")
    if start < 0:
        return [f"## {PARTS[name][1]}", "", "(no finished runs yet)", ""]
    ends = [i for t in titles if (i := text.find(t, start + 1)) > 0]
    return text[start : min(ends, default=len(text))].rstrip("\n").split("\n") + [""]


def report_part(base: Path, docs: Path, name: str) -> list[str]:
    """The section of RESULTS.md for one suite folder."""
    corpus_name, title = PARTS[name]
    part = base / name
    runs = finished_runs(part) if (part / "runs").exists() else []
    if not runs:
        return [f"## {title}", "", "(no finished runs yet)", ""]
    config = json.loads(next((part / "runs").glob("*/config.json")).read_text())
    rows = aggregate(runs, config["boundaries"]["target_rate"])
    dest = docs / "results" / name
    copy_small_files(part, dest)
    plot(dest, [r["name"] for r in rows])
    corpus = load_corpus(corpus_name)
    hashes = split_hashes(corpus)
    steps = config["train"]["max_steps"]
    step_bytes = config["train"]["batch_size"] * config["train"]["seq_len"]
    return [
        f"## {title}",
        "",
        f"Corpus `{corpus_name}`: {corpus.describe()}; sha256 train `{hashes['train'][:16]}…`, "
        f"val `{hashes['val'][:16]}…`, test `{hashes['test'][:16]}…` (full hashes in each run's "
        f"results.json). Preset `{config['preset']}`, {steps} steps of {step_bytes:,} bytes "
        f"({steps * step_bytes:,} training bytes) per run; test = the leading 262,144-byte share of "
        f"every test document, boundaries sampled. {len(runs)} run(s) finished.",
        "",
        markdown_table(rows),
        *[f"- {sentence}" for sentence in reading(name, rows)],
        "",
        *paired_runs(runs),
        f"![validation bpb](results/{name}/val_bpb.png) ![boundary rate](results/{name}/rate.png)",
        "",
        *downstream(part, runs),
        "### What the boundaries look like",
        "",
        *passages(part, rows, corpus),
    ]


def main() -> None:
    """Regenerate docs/RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "base", nargs="?", default="runs/results", help="OUT_BASE of scripts/results_suite.sh"
    )
    parser.add_argument("--docs", default="docs", help="where RESULTS.md and results/ go")
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"the suites whose sections to rewrite, comma-separated (default: {','.join(PARTS)})",
    )
    parser.add_argument(
        "--downstream-only", action="store_true", help="refresh only the downstream tables"
    )
    args = parser.parse_args()
    base, docs = Path(args.base), Path(args.docs)
    parts = args.parts.split(",")
    if unknown := set(parts) - PARTS.keys():
        parser.error(f"--parts {', '.join(sorted(unknown))}: choose from {', '.join(PARTS)}")
    if args.downstream_only:
        refresh_downstream(base, docs)
        print(f"refreshed the downstream tables of {docs / 'RESULTS.md'}")
        return
    old = (docs / "RESULTS.md").read_text() if (docs / "RESULTS.md").exists() else ""
    lines = [
        "# Results",
        "",
        "Generated by `python scripts/results_report.py` from the runs of `scripts/results_suite.sh` "
        "(do not edit by hand). Every run: same architecture (`tiny`, 3.6M parameters), same seed "
        "and data order, same byte budget, target rate 0.2; only the boundary method differs. At "
        "this CPU scale the paper's margins (0.01-0.1 bpb at 147M and 6e9 bytes) are far smaller "
        "than what a few minutes of training leaves unsettled, so read ties as ties.",
        "",
    ]
    # the one hand-written part: what the tables mean
    reading_path = docs / "results" / "reading.md"
    if reading_path.exists():
        lines += [reading_path.read_text().rstrip(), ""]
    for name in PARTS:
        lines += report_part(base, docs, name) if name in parts else kept_section(old, name)
    (docs / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {docs / 'RESULTS.md'}")


if __name__ == "__main__":
    main()
