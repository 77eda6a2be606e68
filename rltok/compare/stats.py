"""The statistics of `rltok compare`: per entry, means over seeds, the spread of test bpb, a verdict
against the reference row (tie, better, worse; none on one seed) and a flag for rates off target."""

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
