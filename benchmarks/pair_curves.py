"""Read runs in pairs: at every validation step, run A's bits per byte minus run B's, for each pair
(for example the estimator against its prior-only row, one seed per pair). Negative means A is ahead.
Reads only the runs' `metrics.jsonl`, so it works on the records under docs/results/ as well.

    python benchmarks/pair_curves.py A1:B1 A2:B2 ... [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def validation_curve(run: Path) -> dict[int, float]:
    """step -> validation bits per byte, from a run folder's metrics.jsonl."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return {r["step"]: r["val_bpb"] for r in rows if "val_bpb" in r}


def pair_differences(pairs: list[tuple[Path, Path]]) -> dict:
    """Per pair, A - B at the steps both validated; per step, how many pairs have A ahead and the mean."""
    rows, by_step = [], {}
    for a, b in pairs:
        curve_a, curve_b = validation_curve(a), validation_curve(b)
        diff = {s: curve_a[s] - curve_b[s] for s in sorted(curve_a) if s in curve_b}
        rows.append({"a": str(a), "b": str(b), "a_minus_b": diff})
        for step, d in diff.items():
            by_step.setdefault(step, []).append(d)
    steps = {
        step: {"pairs": len(ds), "a_ahead": sum(d < 0 for d in ds), "mean": sum(ds) / len(ds)}
        for step, ds in sorted(by_step.items())
    }
    return {"pairs": rows, "by_step": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="+", help="RUN_A:RUN_B, run folders with a metrics.jsonl")
    parser.add_argument("--out", type=Path, help="write the differences as JSON here")
    args = parser.parse_args()
    pairs = []
    for pair in args.pairs:
        a, sep, b = pair.partition(":")
        if not sep:
            raise SystemExit(
                f"pair_curves: '{pair}' is not RUN_A:RUN_B; join the two run folders with ':'"
            )
        for run in (a, b):
            if not (Path(run) / "metrics.jsonl").is_file():
                raise SystemExit(
                    f"pair_curves: {run} has no metrics.jsonl; pass a run folder of rltok train"
                )
        pairs.append((Path(a), Path(b)))
    result = pair_differences(pairs)
    for row in result["pairs"]:
        print(
            f"{row['a']} - {row['b']}:",
            " ".join(f"{s}:{d:+.4f}" for s, d in row["a_minus_b"].items()),
        )
    for step, s in result["by_step"].items():
        print(
            f"step {step}: A ahead in {s['a_ahead']} of {s['pairs']} pairs, mean {s['mean']:+.4f}"
        )
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
