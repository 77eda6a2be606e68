"""`rltok compare`: train a suite of boundary methods on one corpus, one budget and one architecture,
evaluate each on the same test documents, and write results.json, results.md and plots.

Each run lives in OUT/runs/NAME-sSEED; a finished run (it has test_eval.json) is skipped, an
interrupted one is resumed, so the whole command can be restarted until it completes.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rltok.checkpoint import load
from rltok.config import BoundaryConfig, Config, preset
from rltok.data import Corpus, split_hashes
from rltok.errors import UserError
from rltok.evaluate import evaluate
from rltok.flops import flops_per_byte
from rltok.train import train


@dataclass
class Entry:
    """One row of a suite: a name and the config fields it changes."""

    name: str
    boundaries: dict = field(default_factory=dict)
    loss: dict = field(default_factory=dict)
    seeded: bool = False  # noisy methods run with several seeds


_PAPER_RL = {"logit_scale": 1 / 16, "policy_lr_mult": 1.0}
# the paper's estimator: one segmentation per text, no prior
_RL = {"method": "rl", "group_size": 1, "gamma": 0.99, "surprisal_prior": 0.0}
# the group estimator and surprisal prior with the settings of the CPU presets (whatever the suite's preset says)
_RL_GROUP = {
    "method": "rl",
    **{
        name: getattr(BoundaryConfig(), name)
        for name in (
            "group_size",
            "group_texts",
            "group_entropy",
            "gamma",
            "surprisal_prior",
            "prior_cue",
        )
    },
}
# what the CPU preset's policy does without its score-function step: the prior and the rate loss alone
_PRIOR_ONLY = Entry("rl-prior-only", _RL_GROUP, {"policy": 0.0}, seeded=True)
SUITES: dict[str, list[Entry]] = {
    "paper": [
        Entry("rl-group", _RL_GROUP, seeded=True),
        _PRIOR_ONLY,
        Entry("rl", _RL, seeded=True),
        Entry("rl-w8", {**_RL, "policy_window": 8}),
        Entry("uniform", {"method": "uniform"}, seeded=True),
        Entry("nawrot", {"method": "nawrot"}, seeded=True),
        Entry("hnet", {"method": "hnet"}, seeded=True),
        Entry("stride", {"method": "stride"}),
        # the fixed segmentations a learned one must beat, with as many seeds
        Entry("whitespace", {"method": "whitespace"}, seeded=True),
        Entry("word-start", {"method": "word-start"}, seeded=True),
        Entry("entropy", {"method": "entropy"}),
        Entry("bpe", {"method": "bpe"}, seeded=True),
        Entry("flat", {"method": "flat"}),
        Entry("bpe-lm", {"method": "bpe-lm"}),
    ],
    "ablations": [
        Entry("rl-group", _RL_GROUP, seeded=True),
        _PRIOR_ONLY,
        Entry("rl-group-no-prior", {**_RL_GROUP, "surprisal_prior": 0.0}, seeded=True),
        # the prior read from the surprisal of the byte just read: the estimator, not the prior, moves
        # the chunk ends to word starts
        Entry("rl-group-surprisal-cue", {**_RL_GROUP, "prior_cue": "surprisal"}, seeded=True),
        Entry(
            "rl-prior-only-surprisal-cue",
            {**_RL_GROUP, "prior_cue": "surprisal"},
            {"policy": 0.0},
            seeded=True,
        ),
        Entry("rl", _RL, seeded=True),
        Entry("rl-gamma1", {**_RL, "gamma": 1.0}),
        Entry("rl-no-early-exit", {**_RL, "early_exit_reward": False}),
        Entry("rl-no-batch-relative", {**_RL, "batch_relative": False}),
        Entry("rl-w8", {**_RL, "policy_window": 8}),
        Entry("rl-no-rate-loss", _RL, {"rate": 0.0}),
        Entry("rl-paper-scaling", {**_RL, **_PAPER_RL}, {"policy": 0.01, "rate": 0.01}),
    ],
}
SUITES["all"] = SUITES["paper"] + [
    e for e in SUITES["ablations"] if e.name not in {e.name for e in SUITES["paper"]}
]
REFERENCES = (
    "rl-group",
    "rl",
)  # the first of these in a suite is what every other row is read against


def entry_config(entry: Entry, base: Config, seed: int) -> Config:
    """The base config with an entry's changes and the seed applied."""
    cfg = Config.from_dict(json.loads(base.to_json()))
    for name, value in entry.boundaries.items():
        setattr(cfg.boundaries, name, value)
    for name, value in entry.loss.items():
        setattr(cfg.loss, name, value)
    cfg.train.seed = seed
    return cfg.validate()


def run_entry(
    entry: Entry, seed: int, base: Config, corpus: Corpus, out: Path, max_test_bytes: int | None
) -> dict:
    """Train (or resume, or skip) one run and score it on the test documents."""
    run_dir = out / "runs" / f"{entry.name}-s{seed}"
    result_path = run_dir / "test_eval.json"
    if result_path.exists():
        return json.loads(result_path.read_text())
    cfg = entry_config(entry, base, seed)
    print(f"rltok compare: {entry.name} (seed {seed}) -> {run_dir}", file=sys.stderr)
    summary_path = run_dir / "summary.json"
    if not summary_path.exists():
        summary = train(
            cfg, corpus, run_dir, resume=(run_dir / "config.json").exists(), progress=False
        )
        if summary["interrupted"]:
            raise KeyboardInterrupt
    summary = json.loads(summary_path.read_text())
    model = load(run_dir)
    scores = evaluate(
        model,
        corpus.test,
        cfg.train.seq_len,
        cfg.train.batch_size,
        max_bytes=max_test_bytes,
        precision=cfg.train.precision,
    )
    result = {
        "name": entry.name,
        "seed": seed,
        "method": cfg.boundaries.method,
        **scores,
        "train_bytes": summary["bytes"],
        "train_bytes_per_s": summary["bytes_per_s"],
        "wall_s": summary["elapsed"],
        "parameters": summary["parameters"],
        "flops_per_byte": flops_per_byte(model, scores.get("rate"), cfg.train.seq_len),
    }
    result_path.write_text(json.dumps(result, indent=1))
    return result


def run_downstream(run_dir: Path, tasks: list[str], limit: int | None) -> dict:
    """Downstream scores of a finished run (rltok.downstream), cached in its downstream.json per task
    and item limit, so tasks can be added to a finished suite later."""
    from rltok.downstream import load_task, score_items

    path = run_dir / "downstream.json"
    cached = json.loads(path.read_text()) if path.exists() else {}
    missing = [t for t in tasks if cached.get(t, {}).get("limit", "unset") != limit]
    if missing:
        model = load(run_dir)
        cfg = model.config
        for task in missing:
            items = load_task(task)[:limit]
            cached[task] = {
                **score_items(
                    model,
                    items,
                    cfg.train.seq_len,
                    cfg.train.batch_size,
                    precision=cfg.train.precision,
                ),
                "limit": limit,
            }
        path.write_text(json.dumps(cached, indent=1))
    return {task: cached[task] for task in tasks}


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
        row["whitespace_recall_min"] = (
            min(recalls) if recalls else None
        )  # "on every seed" needs the worst
        row["bpb_spread"] = _spread([r["bpb"] for r in runs])
        row["off_rate"] = row["rate"] is not None and abs(row["rate"] - target_rate) > 0.02
        rows.append(row)
    reference = next((r for name in REFERENCES for r in rows if r["name"] == name), None)
    for row in rows:
        if reference is not None and row is not reference:
            spread = max(row["bpb_spread"], reference["bpb_spread"])
            gap = row["bpb"] - reference["bpb"]
            row["reference"] = reference["name"]
            if (
                min(len(row["seeds"]), len(reference["seeds"])) < 2
            ):  # one seed has no spread of its own
                row["vs_reference"] = "one seed: no verdict"
            else:
                verdict = "better" if gap > 0 else "worse"  # said of the reference
                row["vs_reference"] = (
                    "tie" if abs(gap) < 2 * spread else f"{reference['name']} {verdict}"
                )
    return rows


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
            records = [
                json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
            ]
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


def compare(
    suite: str,
    corpus: Corpus,
    budget_bytes: int,
    out: str | Path,
    preset_name: str = "tiny",
    seed: int = 0,
    seeds: int = 3,
    max_test_bytes: int | None = None,
    only: list[str] | None = None,
    downstream: list[str] | None = None,
    downstream_limit: int | None = None,
) -> dict:
    """Run every entry of a suite (or the `only` ones, resumably) and write results.json, results.md
    and the plots; `downstream` tasks (rltok.downstream) add a table of their scores."""
    if suite not in SUITES:
        raise UserError(f"unknown suite {suite!r}; choose one of: {', '.join(SUITES)}")
    entries = [e for e in SUITES[suite] if only is None or e.name in only]
    unknown = set(only or []) - {e.name for e in SUITES[suite]}
    if unknown or not entries:
        raise UserError(
            f"--methods {', '.join(sorted(unknown)) or '(none)'} not in the {suite} suite; "
            f"choose from: {', '.join(e.name for e in SUITES[suite])}"
        )
    out = Path(out)
    base = preset(preset_name)
    base.train.max_steps = max(
        1, math.ceil(budget_bytes / (base.train.batch_size * base.train.seq_len))
    )
    base.train.eval_every = max(1, base.train.max_steps // 5)
    downstream = downstream or []
    if downstream:
        from rltok.downstream import load_task

        for task in downstream:  # a bad task name stops the suite before any training
            load_task(task)
    results = []
    for entry in entries:
        for s in range(seed, seed + (seeds if entry.seeded else 1)):
            result = run_entry(entry, s, base, corpus, out, max_test_bytes)
            if downstream:
                result = {
                    **result,
                    "downstream": run_downstream(
                        out / "runs" / f"{entry.name}-s{s}", downstream, downstream_limit
                    ),
                }
            results.append(result)
    rows = aggregate(results, base.boundaries.target_rate)
    downstream_rows = aggregate_downstream(results, downstream)
    report = {
        "suite": suite,
        "corpus": corpus.describe(),
        "corpus_sha256": split_hashes(corpus),
        "preset": preset_name,
        "budget_bytes": budget_bytes,
        "steps": base.train.max_steps,
        "target_rate": base.boundaries.target_rate,
        "rows": rows,
        "downstream_tasks": downstream,
        "downstream_limit": downstream_limit,
        "downstream_rows": downstream_rows,
        "runs": results,
    }
    (out / "results.json").write_text(json.dumps(report, indent=1))
    table = markdown_table(rows)
    if downstream_rows:
        table += "\nDownstream, zero-shot (rltok eval-downstream):\n\n" + downstream_table(
            downstream_rows, downstream
        )
    (out / "results.md").write_text(table)
    report["plots"] = [str(p) for p in plot(out, [e.name for e in entries])]
    return report
