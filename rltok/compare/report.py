"""The report of `rltok compare`: results.json, the results.md tables (the runs' scores and the
downstream scores) and the plots of every run's curves."""

from __future__ import annotations

import json
import math
from pathlib import Path

from rltok.compare.stats import RATE_MATCH
from rltok.plots import read_records


def downstream_table(rows: list[dict], tasks: list[str]) -> str:
    """Downstream results as a markdown table: bits per byte of the right answer (accuracy) per task."""
    lines = [
        "| method | seeds | " + " | ".join(f"{t}: answer bpb (acc)" for t in tasks) + " |",
        "|---|---|" + "---|" * len(tasks),
    ]
    for r in rows:
        cells = [f"{r[t]['bpb']:.3f} ({r[t]['acc']:.2f})" for t in tasks]
        lines.append(f"| {r['name']} | {r['seeds']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _fmt(value, spec: str) -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


def _millions(count: float | None) -> str:
    return "-" if count is None else f"{count / 1e6:.2f}M"


def markdown_table(rows: list[dict]) -> str:
    """The results as a markdown table."""
    reference = next((r["reference"] for r in rows if "reference" in r), "reference")
    lines = [
        "| method | seeds | test bpb | bpb (doc mean) | rate | bytes/chunk | ws recall (worst seed) "
        f"| ws precision | word-start recall | word-start precision | parameters | train B/s | FLOPs/byte "
        f"| wall s | vs {reference} |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bpb = _fmt(r["bpb"], ".4f") + (f" ± {r['bpb_spread']:.4f}" if len(r["seeds"]) > 1 else "")
        rate = _fmt(r["rate"], ".3f") + (" (off target)" if r["off_rate"] else "")
        worst = r.get("whitespace_recall_min")
        recall = _fmt(r["whitespace_recall"], ".3f") + (
            f" ({worst:.3f})" if len(r["seeds"]) > 1 and worst is not None else ""
        )
        lines.append(
            f"| {r['name']} | {len(r['seeds'])} | {bpb} | {_fmt(r['bpb_doc_mean'], '.4f')} | {rate} "
            f"| {_fmt(r['bytes_per_chunk'], '.2f')} | {recall} "
            f"| {_fmt(r['whitespace_precision'], '.3f')} | {_fmt(r.get('word_start_recall'), '.3f')} "
            f"| {_fmt(r.get('word_start_precision'), '.3f')} | {_millions(r.get('parameters'))} "
            f"| {_fmt(r['train_bytes_per_s'], ',.0f')} "
            f"| {_fmt(r['flops_per_byte'], '.2e')} | {_fmt(r['wall_s'], '.0f')} "
            f"| {r.get('vs_reference', '')} |"
        )
    return "\n".join(lines) + "\n"


def gold_table(rows: list[dict]) -> str:
    """The chunk ends against the corpus's gold words, for the rows that have them."""
    lines = [
        "| method | seeds | test bpb | rate | end: precision / recall / F1 | end: token F1 "
        "| start: precision / recall / F1 | start: token F1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("gold_token_f1") is None:
            continue
        edges = [
            " / ".join(_fmt(r[f"gold_{edge}_{k}"], ".3f") for k in ("precision", "recall", "f1"))
            + f" | {_fmt(r[f'gold_{edge}_token_f1'], '.3f')}"
            for edge in ("end", "start")
        ]
        lines.append(
            f"| {r['name']} | {len(r['seeds'])} | {_fmt(r['bpb'], '.4f')} | {_fmt(r['rate'], '.3f')} "
            f"| {edges[0]} | {edges[1]} |"
        )
    return "\n".join(lines) + "\n"


def gold_section(rows: list[dict]) -> str:
    """The gold table with the sentence that says how to read it; empty where no row has gold."""
    if not any(r.get("gold_token_f1") is not None for r in rows):
        return ""
    return (
        "\nChunk ends against the gold words (end: a chunk ends on a word's last byte; start: on its "
        "first byte; token F1: a word counts when chunk ends fall on its edges and nowhere inside; "
        "means over seeds, test split):\n\n" + gold_table(rows)
    )


def paired_table(pairs: list[dict], against: str = "prior only") -> str:
    """Each learned entry against another entry, seed by seed, as a markdown table."""
    lines = [
        f"| learned | {against} | seeds | learned - {against}, per seed | mean | standard error "
        "| learned lower |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in pairs:
        per_seed = ", ".join(f"{d:+.4f}" for d in p["differences"])
        lines.append(
            f"| {p['learned']} | {p['against']} | {len(p['seeds'])} | {per_seed} "
            f"| {p['mean']:+.4f} | {_fmt(p['standard_error'], '.4f')} "
            f"| {p['learned_lower']} of {len(p['seeds'])} |"
        )
    return "\n".join(lines) + "\n"


def paired_section(pairs: list[dict]) -> str:
    """The paired table with the sentence that says how to read it."""
    return (
        "What the score-function step adds: each learned row minus the same row with its policy "
        "loss off, on the seeds both ran (test bpb; a pair shares its seed's data order and initial "
        "weights, so the seed spread cancels):\n\n" + paired_table(pairs)
    )


def versus_rule_section(pairs: list[dict]) -> str:
    """Each learned row against the best fixed rule at its rate, with how to read it."""
    return (
        "Each learned row minus the fixed rule with the lowest mean test bpb among those within "
        f"{RATE_MATCH} of its rate (gold, an oracle, is not a rule), on the seeds both ran:\n\n"
        + paired_table(pairs, "best rule")
    )


def plot(out: Path, names: list[str]) -> list[Path]:
    """Validation bpb against training bytes, and training boundary rate against steps, per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for kind, x_key, y_key, ylabel in (
        ("val_bpb", "bytes", "val_bpb", "validation bits per byte"),
        ("rate", "step", "boundary_rate", "training boundary rate"),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.set_prop_cycle(color=plt.cm.tab20.colors)
        for run_dir in sorted((out / "runs").iterdir()):
            if (
                run_dir.name.rsplit("-s", 1)[0] not in names
                or not (run_dir / "metrics.jsonl").exists()
            ):
                continue
            records = read_records(run_dir)
            points = [(r[x_key], r[y_key]) for r in records if y_key in r and x_key in r]
            if points:
                ax.plot(*zip(*points), label=run_dir.name, linewidth=1.2)
        ax.set_xlabel("training bytes" if x_key == "bytes" else "step")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7, ncol=2)
        ax.grid(alpha=0.3)
        path = out / f"{kind}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def write(out: Path, report: dict, names: list[str]) -> list[Path]:
    """Write a suite's results.json and results.md into out, and plot the named entries' runs."""
    (out / "results.json").write_text(json.dumps(report, indent=1))
    table = markdown_table(report["rows"]) + gold_section(report["rows"])
    if report.get("paired"):
        table += "\n" + paired_section(report["paired"])
    if report.get("versus_rule"):
        table += "\n" + versus_rule_section(report["versus_rule"])
    if report["downstream_rows"]:
        table += "\nDownstream, zero-shot (rltok eval-downstream):\n\n" + downstream_table(
            report["downstream_rows"], report["downstream_tasks"]
        )
    (out / "results.md").write_text(table)
    return plot(out, names)
