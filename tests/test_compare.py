"""`rltok compare` on a tiny budget: the table, the JSON, the plots, and a rerun that trains nothing."""

import json

from rltok.cli import main
from rltok.compare import aggregate, best_rules, paired, paired_table


def test_compare_two_methods_writes_table_json_and_plots(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = [
        "compare",
        "--suite",
        "paper",
        "--methods",
        "rl,uniform",
        "--preset",
        "smoke",
        "--budget-bytes",
        "4096",
        "--seeds",
        "2",
        "--max-test-bytes",
        "2048",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert (
        table.startswith("| method | seeds | test bpb")
        and "| rl | 2 |" in table
        and "| uniform | 2 |" in table
    )
    report = json.loads((out / "results.json").read_text())
    assert [row["name"] for row in report["rows"]] == ["rl", "uniform"]
    assert report["paired"] == []  # neither entry is another's prior-only row
    assert len(report["runs"]) == 4 and set(report["corpus_sha256"]) == {"train", "val", "test"}
    # a row averages its seeds' runs (8 steps: the policy's rate is still noise)
    for row in report["rows"]:
        rates = [run["rate"] for run in report["runs"] if run["name"] == row["name"]]
        assert (
            abs(row["rate"] - sum(rates) / 2) < 1e-9 and row["bpb"] > 0 and row["bpb_spread"] >= 0
        )
    assert abs(report["rows"][1]["rate"] - 0.2) < 0.02  # uniform boundaries are drawn at the rate
    assert (out / "val_bpb.png").stat().st_size > 1000 and (out / "rate.png").stat().st_size > 1000
    # the downstream column set: the built-in agreement task, averaged over the seeds
    assert "| method | seeds | agreement: answer bpb (acc) |" in table
    runs = [
        json.loads((out / "runs" / f"rl-s{s}" / "downstream.json").read_text())["agreement"]
        for s in (0, 1)
    ]
    (rl_row, _) = report["downstream_rows"]
    assert rl_row["agreement"]["bpb"] == sum(r["bpb"] for r in runs) / 2 and runs[0]["items"] == 320

    # finished runs are skipped: a rerun reproduces the table without touching the runs or rescoring
    stamps = [
        (out / "runs" / "rl-s0" / name).stat().st_mtime_ns
        for name in ("metrics.jsonl", "downstream.json")
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out == table
    assert [
        (out / "runs" / "rl-s0" / name).stat().st_mtime_ns
        for name in ("metrics.jsonl", "downstream.json")
    ] == stamps


def test_compare_checks_downstream_tasks_before_training(tmp_path, capsys):
    assert (
        main(
            [
                "compare",
                "--methods",
                "uniform",
                "--budget-bytes",
                "4096",
                "--downstream",
                "agreement,piqa",
                "--out",
                str(tmp_path / "cmp"),
            ]
        )
        == 2
    )
    assert (
        "unknown task 'piqa'" in capsys.readouterr().err
        and not (tmp_path / "cmp" / "runs").exists()
    )


def test_compare_rejects_a_method_outside_the_suite(tmp_path, capsys):
    assert (
        main(["compare", "--methods", "magic", "--budget-bytes", "4096", "--out", str(tmp_path)])
        == 2
    )
    assert "--methods magic not in the paper suite" in capsys.readouterr().err


def test_a_gap_is_a_tie_below_twice_the_seed_spread_and_undecided_with_one_seed():
    def run(name, seed, bpb, rate=0.2):
        return {"name": name, "method": name, "seed": seed, "bpb": bpb, "rate": rate}

    def two(name, bpb, rate=0.2):
        return [run(name, 0, bpb, rate), run(name, 1, bpb + 0.001, rate)]

    rows = aggregate(
        [
            run("rl", 0, 3.00),
            run("rl", 1, 3.02),  # spread 0.0141
            *two("close", 3.03),
            *two("far", 3.10),
            *two("good", 2.90),
            *two("off", 3.0, rate=0.25),
            run("alone", 0, 3.5),
        ],
        target_rate=0.2,
    )
    verdict = {row["name"]: row.get("vs_reference") for row in rows}
    assert verdict == {
        "rl": None,
        "close": "tie",
        "far": "rl better",
        "good": "rl worse",
        "off": "tie",
        "alone": "one seed: no verdict",
    }  # 0.5 worse, but one run says nothing of its spread
    assert [row["name"] for row in rows if row["off_rate"]] == ["off"]

    single = aggregate([run("rl", 0, 3.0), *two("other", 3.5)], target_rate=0.2)
    assert single[1]["vs_reference"] == "one seed: no verdict"

    def run_at(name, seed, bpb, recall):
        return {**run(name, seed, bpb), "whitespace_recall": recall}

    grouped = aggregate(
        [
            run_at("rl-group", 0, 3.0, 0.95),
            run_at("rl-group", 1, 3.1, 0.91),
            run_at("rl", 0, 3.5, 0.2),
            run_at("rl", 1, 3.6, 0.1),
        ],
        target_rate=0.2,
    )
    assert grouped[0]["whitespace_recall_min"] == 0.91  # "on every seed" reads the worst one
    assert grouped[1]["reference"] == "rl-group" and grouped[1]["vs_reference"] == "rl-group better"


def test_the_report_tables_the_downstream_tasks_every_run_was_scored_on(tmp_path):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "results_report", Path(__file__).parents[1] / "scripts" / "results_report.py"
    )
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    score = {"items": 10, "acc": 0.5, "acc_norm": 0.5, "bpb": 3.0, "bpb_se": 0.1, "acc_se": 0.1}
    runs = [{"name": "rl", "seed": 0}, {"name": "rl", "seed": 1}, {"name": "uniform", "seed": 0}]
    for run, (bpb, extra) in zip(runs, [(2.0, True), (4.0, True), (5.0, False)]):
        folder = tmp_path / "runs" / f"{run['name']}-s{run['seed']}"
        folder.mkdir(parents=True)
        tasks = {"agreement": {**score, "bpb": bpb}, **({"hyperbaton": score} if extra else {})}
        (folder / "downstream.json").write_text(json.dumps(tasks))
    lines = report.downstream(tmp_path, runs)
    table = lines[-1]
    assert (
        "| method | seeds | agreement: answer bpb (acc) |\n" in table and "hyperbaton" not in table
    )
    assert "| rl | 2 | 3.000 (0.50) |" in table and "| uniform | 1 | 5.000 (0.50) |" in table
    assert report.downstream(tmp_path, []) == []

    # --downstream-only splices the table into the part's section, before its passages, idempotently
    base, docs = tmp_path / "base", tmp_path / "docs"
    (tmp_path / "runs").rename(tmp_path / "moved")
    (base / "english-paper").mkdir(parents=True)
    (tmp_path / "moved").rename(base / "english-paper" / "runs")
    for run in runs:
        (
            base / "english-paper" / "runs" / f"{run['name']}-s{run['seed']}" / "test_eval.json"
        ).write_text(json.dumps(run))
    docs.mkdir()
    sections = [
        f"## {title}\n\ntable\n\n### What the boundaries look like\n\npassages\n"
        for _, title in report.PARTS.values()
    ]
    (docs / "RESULTS.md").write_text("# Results\n\n" + "\n".join(sections))
    report.refresh_downstream(base, docs)
    once = (docs / "RESULTS.md").read_text()
    report.refresh_downstream(base, docs)
    assert (docs / "RESULTS.md").read_text() == once and once.count(
        "### Downstream, zero-shot"
    ) == 1
    assert once.index("table") < once.index("| rl | 2 | 3.000 (0.50) |") < once.index("passages")
    assert (docs / "results" / "english-paper" / "runs" / "rl-s1" / "downstream.json").exists()


def test_the_report_reads_each_learned_row_against_its_prior_only_row():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "results_report", Path(__file__).parents[1] / "scripts" / "results_report.py"
    )
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    runs = [
        {"name": "rl-group", "seed": 0, "bpb": 3.00},
        {"name": "rl-group", "seed": 1, "bpb": 3.10},
        {"name": "rl-prior-only", "seed": 0, "bpb": 3.02},
        {"name": "rl-prior-only", "seed": 1, "bpb": 3.11},
        {"name": "uniform", "seed": 0, "bpb": 2.90},
    ]
    table = report.paired_runs(runs)[-1]
    assert (
        "| rl-group | rl-prior-only | 2 | -0.0200, -0.0100 | -0.0150 | 0.0050 | 2 of 2 |" in table
    )
    assert "uniform" not in table
    # a part without a prior-only row prints no paired table at all
    assert report.paired_runs([r for r in runs if r["name"] != "rl-prior-only"]) == []


def test_the_report_keeps_the_sections_of_the_parts_it_does_not_rewrite():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "results_report", Path(__file__).parents[1] / "scripts" / "results_report.py"
    )
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    sections = {
        name: f"## {title}\n\n| {name} table |\n\n### What the boundaries look like\n\n{name} passages"
        for name, (_, title) in report.PARTS.items()
    }
    text = "# Results\n\nreading\n\n" + "\n\n".join(sections.values()) + "\n"
    for name, section in sections.items():
        assert "\n".join(report.kept_section(text, name)).rstrip("\n") == section
    # a part the file does not have yet reads as unfinished rather than vanishing
    missing = report.kept_section("# Results\n", "code")
    assert missing[0] == f"## {report.PARTS['code'][1]}" and "no finished runs" in missing[2]


def test_every_suite_entry_is_a_valid_config_that_sets_what_it_names():
    """A suite entry with a misspelt setting or a refused combination fails here, not hours into a
    run."""
    import functools

    from rltok.compare.suites import SUITES, entry_config
    from rltok.config import preset

    for suite, entries in SUITES.items():
        for entry in entries:
            cfg = entry_config(entry, preset("smoke"), seed=3)
            assert cfg.train.seed == 3, (suite, entry.name)
            for part, changes in ((cfg.boundaries, entry.boundaries), (cfg.loss, entry.loss)):
                for path, value in changes.items():
                    got = functools.reduce(getattr, path.split("."), part)
                    assert got == value, (entry.name, path)


def test_compare_resumes_an_interrupted_run_with_the_config_it_started_with(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "--suite", "paper", "--methods", "bpe-lm", "--preset", "smoke"]
    argv += ["--max-test-bytes", "2048", "--downstream", "none", "--out", str(out)]
    assert main([*argv, "--budget-bytes", "4096"]) == 0
    run = out / "runs" / "bpe-lm-s0"
    table = capsys.readouterr().out
    # interrupted after its last checkpoint: the BPE's fitted size must come back from the run
    (run / "summary.json").unlink()
    (run / "test_eval.json").unlink()
    assert main([*argv, "--budget-bytes", "4096"]) == 0
    assert capsys.readouterr().out == table
    # a run started with other settings is not silently continued with the suite's
    (run / "summary.json").unlink()
    (run / "test_eval.json").unlink()
    assert main([*argv, "--budget-bytes", "8192"]) == 2
    assert "was started with another config (train.max_steps," in capsys.readouterr().err


def test_a_learned_row_is_read_against_its_prior_only_row_seed_by_seed():
    def run(name, seed, bpb):
        return {"name": name, "seed": seed, "bpb": bpb}

    results = [
        run("learned", 0, 2.50),
        run("learned", 1, 2.60),
        run("learned", 2, 2.70),
        run("prior", 0, 2.52),
        run("prior", 1, 2.61),
        run("prior", 2, 2.69),
        run("prior", 3, 2.00),  # no learned run on seed 3: not a pair
        run("lonely-prior", 0, 2.0),  # its learned row did not run
    ]
    [pair] = paired(results, [("learned", "prior"), ("absent", "lonely-prior")])
    assert pair["seeds"] == [0, 1, 2] and pair["learned_lower"] == 2
    assert [round(d, 6) for d in pair["differences"]] == [-0.02, -0.01, 0.01]
    assert abs(pair["mean"] + 0.02 / 3) < 1e-9
    # the standard error of the mean difference: the seed's own spread (0.1 here) cancels
    assert abs(pair["standard_error"] - 0.0152753 / 3**0.5) < 1e-6
    assert "| learned | prior | 3 | -0.0200, -0.0100, +0.0100 | -0.0067 | 0.0088 | 2 of 3 |" in (
        paired_table([pair])
    )
    [one] = paired(results[:1] + results[3:4], [("learned", "prior")])
    assert one["standard_error"] is None and "| - |" in paired_table([one])


def test_a_learned_row_is_read_against_the_best_rule_at_its_own_rate():
    def row(name, method, rate, bpb):
        return {"name": name, "method": method, "rate": rate, "bpb": bpb}

    rows = [
        row("learned", "rl", 0.20, 3.10),
        row("learned-at-char-rate", "rl", 0.33, 3.08),
        row("lonely", "rl", 0.60, 3.50),  # no rule near its rate
        row("uniform", "uniform", 0.20, 3.13),
        row("entropy", "entropy", 0.19, 3.12),
        row("char", "char", 0.336, 3.04),  # the lowest rule, at its own rate only
        row("gold", "gold", 0.205, 3.03),  # an oracle, not a rule
    ]
    learned = ["learned", "learned-at-char-rate", "lonely"]
    assert best_rules(rows, learned) == [("learned", "entropy"), ("learned-at-char-rate", "char")]


def test_the_learned_rows_are_the_recipes_and_the_straight_through_methods():
    from rltok.compare.suites import SUITES

    learned = {e.name for e in SUITES["chinese"] if e.learned}
    assert {"rl-group", "rl-prior-only", "hnet", "nawrot"} <= learned
    assert not learned & {"uniform", "char", "gold", "bpe", "flat", "bpe-lm"}


def test_every_prior_only_entry_is_its_learned_entry_with_the_policy_loss_off():
    from rltok.compare.suites import SUITES, entry_config
    from rltok.config import preset

    for suite, entries in SUITES.items():
        by_name = {e.name: e for e in entries}
        for entry in entries:
            if not entry.prior_of:
                continue
            learned = by_name[entry.prior_of]  # in the same suite
            off, on = (entry_config(e, preset("tiny"), seed=0) for e in (entry, learned))
            assert off.loss.policy == 0.0 and on.loss.policy != 0.0, (suite, entry.name)
            # the price per chunk end only acts through the policy loss
            on.loss.policy, on.boundaries.estimator.rate_neutral = 0.0, False
            assert off.to_json() == on.to_json() and entry.seeded == learned.seeded, entry.name
    names = {e.name for e in SUITES["ablations"] if e.prior_of}
    assert {"rl-prior-only", "rl-prior-only-byte-head-smoothed"} <= names
