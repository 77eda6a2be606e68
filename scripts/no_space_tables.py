"""Print the tables of docs/without-spaces.md, or of any folder of `rltok compare` runs, from run
records alone (folders NAME-sSEED, each with its config.json, metrics.jsonl and test_eval.json, as
`rltok compare` leaves them under OUT/runs).

    python scripts/no_space_tables.py docs/results/chinese-192

Rows: means over seeds of the test split's bits per byte (± one standard error of the mean over
seeds: the sample standard deviation over sqrt(n)), rate and gold scores. Pairs, read seed by seed
(a pair shares its seed's data order and initial weights): each learned row minus its prior-only row,
minus each fixed rule within 0.02 of its rate, and minus the gold oracle (on either edge of the
words); the oracle minus each rule at whatever rate (the most a segmentation of words can win over
it); on the test split, and on the validation split as each run's last periodic validation read it
(the first 64 KB of the split, metrics.jsonl), the split on which variants are chosen.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from rltok.compare.stats import RATE_MATCH, RULES, aggregate, paired
from rltok.compare.suites import SUITES
from rltok.plots import read_records

ORACLES = ("gold", "gold-end")  # chunk ends on the gold words' first bytes, or on their last


def records(folder: Path, split: str) -> list[dict]:
    """One result per run folder: its name and seed, method, and scores on `split`."""
    out = []
    for run in sorted(p for p in folder.iterdir() if (p / "test_eval.json").exists()):
        name, seed = run.name.rsplit("-s", 1)
        result = {
            **json.loads((run / "test_eval.json").read_text()),
            "name": name,
            "seed": int(seed),
        }
        if split == "val":
            result["bpb"] = [r for r in read_records(run) if "val_bpb" in r][-1]["val_bpb"]
        result.setdefault(
            "method", json.loads((run / "config.json").read_text())["boundaries"]["method"]
        )
        out.append(result)
    return out


def mean_se(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.4f}"
    se = statistics.stdev(values) / len(values) ** 0.5
    return f"{statistics.fmean(values):.4f} ± {se:.4f}"


def rows_table(results: list[dict]) -> None:
    """Each row's mean scores; on a corpus without gold words (English with its spaces), the
    word-start recall and precision of its chunk ends instead of the gold F1."""
    gold = any("gold_end_f1" in r for r in results)
    edges = "end F1 / token F1 | start F1 / token F1" if gold else "word-start recall / precision"
    print(f"| row | seeds | test bpb | rate | {edges} |")
    print("|---|---|---|---|---|" + ("---|" if gold else ""))
    for row in aggregate(results, 0.2):
        bpb = [r["bpb"] for r in results if r["name"] == row["name"]]
        if row["rate"] is None:  # no chunk ends: the flat byte model
            rate, scores = "-", "- | -" if gold else "-"
        else:
            rate = f"{row['rate']:.3f}"
            scores = (
                f"{row['gold_end_f1']:.3f} / {row['gold_end_token_f1']:.3f} "
                f"| {row['gold_start_f1']:.3f} / {row['gold_start_token_f1']:.3f}"
                if gold
                else f"{row['word_start_recall']:.3f} / {row['word_start_precision']:.3f}"
            )
        print(f"| {row['name']} | {len(bpb)} | {mean_se(bpb)} | {rate} | {scores} |")


def pairs_table(title: str, pairs: list[dict], first: str = "learned") -> None:
    print(f"\n{title}\n")
    print(f"| {first} | against | seeds | per seed | mean ± SE | {first} lower |")
    print("|---|---|---|---|---|---|")
    for p in pairs:
        per_seed = ", ".join(f"{d:+.4f}" for d in p["differences"])
        se = f" ± {p['standard_error']:.4f}" if p["standard_error"] is not None else ""
        print(
            f"| {p['learned']} | {p['against']} | {len(p['seeds'])} | {per_seed} "
            f"| {p['mean']:+.4f}{se} | {p['learned_lower']} of {len(p['seeds'])} |"
        )


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/results/chinese-192")
    entries = {e.name: e for suite in ("chinese", "all") for e in SUITES[suite]}.values()
    learned = [e.name for e in entries if e.learned and not e.prior_of]
    prior_of = [(e.prior_of, e.name) for e in entries if e.prior_of]
    for split in ("test", "val"):
        results = records(folder, split)
        rows = aggregate(results, 0.2)
        print(f"\n## {split} split\n")
        if split == "test":
            rows_table(results)
        pairs_table("Learned minus its prior-only row:", paired(results, prior_of))
        near = [
            (row["name"], rule["name"])
            for row in rows
            if row["name"] in learned
            for rule in rows
            if rule["method"] in RULES and abs(rule["rate"] - row["rate"]) <= RATE_MATCH
        ]
        pairs_table("Learned minus each fixed rule within 0.02 of its rate:", paired(results, near))
        oracles = sorted({r["name"] for r in results if r["method"] in ORACLES})
        if oracles:
            to_oracle = [(name, oracle) for oracle in oracles for name in learned]
            pairs_table("Learned minus the gold oracle:", paired(results, to_oracle))
            rules = sorted({r["name"] for r in results if r["method"] in RULES})
            against = paired(results, [(oracle, rule) for oracle in oracles for rule in rules])
            pairs_table("The gold oracle minus each fixed rule, at any rate:", against, "oracle")


if __name__ == "__main__":
    main()
