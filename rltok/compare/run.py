"""The driver of `rltok compare`: trains and scores every run of a suite in OUT/runs/NAME-sSEED (a
finished run, with its test_eval.json, is skipped; an interrupted one is resumed), then reports."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from rltok.checkpoint import load, run_config
from rltok.compare.report import write
from rltok.compare.stats import aggregate, aggregate_downstream, best_rules, paired
from rltok.compare.suites import Entry, entry_config, select
from rltok.config import Config, preset
from rltok.data import Corpus, split_hashes
from rltok.errors import UserError
from rltok.evaluate import evaluate
from rltok.flops import flops_per_byte
from rltok.train import train


def _resumed_config(cfg: Config, run_dir: Path) -> Config:
    """The config an interrupted run was started with (it holds what training fitted, such as the BPE's
    size); an error naming the fields if the suite now asks for another."""
    saved = run_config(run_dir)
    asked, found = json.loads(cfg.to_json()), json.loads(saved.to_json())
    if not asked["boundaries"]["bpe_vocab"]:  # 0 asks training to fit it
        asked["boundaries"]["bpe_vocab"] = found["boundaries"]["bpe_vocab"]
    changed = [
        f"{section}.{name}"
        for section, fields in asked.items()
        if isinstance(fields, dict)
        for name, value in fields.items()
        if found.get(section, {}).get(name) != value
    ]
    if changed:
        raise UserError(
            f"{run_dir} was started with another config ({', '.join(changed)} differ); delete the "
            "folder to train it again with this suite's settings, or give compare another --out"
        )
    return saved


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
        resume = (run_dir / "config.json").exists()
        if resume:
            cfg = _resumed_config(cfg, run_dir)
        summary = train(cfg, corpus, run_dir, resume=resume, progress=False)
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
        gold=corpus.gold_of("test"),
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
    entries = select(suite, only)
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
    report = {
        "suite": suite,
        "corpus": corpus.describe(),
        "corpus_sha256": split_hashes(corpus),
        "preset": preset_name,
        "budget_bytes": budget_bytes,
        "steps": base.train.max_steps,
        "target_rate": base.boundaries.target_rate,
        "rows": rows,
        "paired": paired(results, [(e.prior_of, e.name) for e in entries if e.prior_of]),
        "versus_rule": paired(results, best_rules(rows, [e.name for e in entries if e.learned])),
        "downstream_tasks": downstream,
        "downstream_limit": downstream_limit,
        "downstream_rows": aggregate_downstream(results, downstream),
        "runs": results,
    }
    report["plots"] = [str(p) for p in write(out, report, [e.name for e in entries])]
    return report
