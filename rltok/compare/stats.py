"""The statistics of `rltok compare`: per entry, means over seeds, the spread of test bpb, a verdict
against the reference row (tie, better, worse; none on one seed) and a flag for rates off target;
and each learned entry read in pairs, seed by seed, against its prior-only entry and against the best
fixed rule at its rate."""

from __future__ import annotations

import statistics

# the first of these in a suite is what every other row is read against
REFERENCES = ("rl-group", "rl")


def aggregate_downstream(results: list[dict], tasks: list[str]) -> list[dict]:
    """Per entry and task: the answer's bits per byte and the accuracy, averaged over seeds."""
    rows = []
    for name in dict.fromkeys(r["name"] for r in results):
        runs = [r["downstream"] for r in results if r["name"] == name and "downstream" in r]
        if not runs:
            continue
        row = {"name": name, "seeds": len(runs)}
        for task in tasks:
            row[task] = {
                key: statistics.fmean(run[task][key] for run in runs)
                for key in ("bpb", "acc", "acc_norm", "bpb_se", "acc_se")
            }
        rows.append(row)
    return rows


# the scores against gold words, where the corpus has them (rltok.gold_scores)
GOLD_KEYS = (
    "gold_end_precision",
    "gold_end_recall",
    "gold_end_f1",
    "gold_end_token_f1",
    "gold_start_precision",
    "gold_start_recall",
    "gold_start_f1",
    "gold_start_token_f1",
    "gold_token_f1",
)


def _spread(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def aggregate(results: list[dict], target_rate: float) -> list[dict]:
    """One row per entry: means over seeds, the spread of test bpb, and flags for fair reading."""
    rows = []
    for name in dict.fromkeys(r["name"] for r in results):
        runs = [r for r in results if r["name"] == name]
        row = {"name": name, "method": runs[0]["method"], "seeds": [r["seed"] for r in runs]}
        for key in (
            "bpb",
            "bpb_doc_mean",
            "rate",
            "bytes_per_chunk",
            "whitespace_recall",
            "whitespace_precision",
            "word_start_recall",
            "word_start_precision",
            "train_bytes_per_s",
            "flops_per_byte",
            "wall_s",
            "train_bytes",
            "parameters",
            *GOLD_KEYS,
        ):
            values = [r[key] for r in runs if r.get(key) is not None]
            row[key] = statistics.fmean(values) if values else None
        recalls = [r["whitespace_recall"] for r in runs if r.get("whitespace_recall") is not None]
        # "on every seed" needs the worst
        row["whitespace_recall_min"] = min(recalls) if recalls else None
        row["bpb_spread"] = _spread([r["bpb"] for r in runs])
        row["off_rate"] = row["rate"] is not None and abs(row["rate"] - target_rate) > 0.02
        rows.append(row)
    reference = next((r for name in REFERENCES for r in rows if r["name"] == name), None)
    for row in rows:
        if reference is not None and row is not reference:
            spread = max(row["bpb_spread"], reference["bpb_spread"])
            gap = row["bpb"] - reference["bpb"]
            row["reference"] = reference["name"]
            # one seed has no spread of its own
            if min(len(row["seeds"]), len(reference["seeds"])) < 2:
                row["vs_reference"] = "one seed: no verdict"
            else:
                verdict = "better" if gap > 0 else "worse"  # said of the reference
                row["vs_reference"] = (
                    "tie" if abs(gap) < 2 * spread else f"{reference['name']} {verdict}"
                )
    return rows


def paired(results: list[dict], pairs: list[tuple[str, str]]) -> list[dict]:
    """Per (learned entry, entry it is read against) pair that both ran: test bpb learned minus the
    other on each seed they share, the mean, its standard error and the seeds where the learned entry
    is lower. A pair shares its seed's data order and initial weights, so the seed spread cancels."""
    bpb = {(r["name"], r["seed"]): r["bpb"] for r in results}
    out = []
    for learned, against in pairs:
        seeds = sorted(s for name, s in bpb if name == learned and (against, s) in bpb)
        if not seeds:
            continue
        diffs = [bpb[learned, s] - bpb[against, s] for s in seeds]
        se = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else None
        out.append(
            {
                "learned": learned,
                "against": against,
                "seeds": seeds,
                "differences": diffs,
                "mean": statistics.fmean(diffs),
                "standard_error": se,
                "learned_lower": sum(d < 0 for d in diffs),
            }
        )
    return out


# the fixed segmentations a user can apply (the gold oracle is not one)
RULES = ("uniform", "stride", "whitespace", "word-start", "entropy", "char", "bpe")
RATE_MATCH = 0.02  # rows further apart in rate are not read against each other


def best_rules(rows: list[dict], learned: list[str]) -> list[tuple[str, str]]:
    """(learned entry, the rule with the lowest mean test bpb among those whose mean rate is within
    RATE_MATCH of its own) for each learned entry that has such a rule."""
    pairs = []
    for row in (r for r in rows if r["name"] in learned and r["rate"] is not None):
        near = [
            r
            for r in rows
            if r["method"] in RULES
            and r["rate"] is not None
            and abs(r["rate"] - row["rate"]) <= RATE_MATCH
        ]
        if near:
            pairs.append((row["name"], min(near, key=lambda r: r["bpb"])["name"]))
    return pairs
