"""Print the tables of docs/learner.md as markdown, from the run records under docs/results/ alone.

Usage: python scripts/learner_tables.py [--all] [--check-recipes] [--default]

Each row is a set of record folders (one per seed: NAME-sSEED) named by the recipe of
rltok/recipes.py whose settings its config.json has, or, where no recipe matches, by what it changes.
Test bits per byte come from each record's test_eval.json, validation from val_eval.json (where the
record has one); "both" is the mean of the two. "±" is always one standard error of the mean over
seeds (the sample standard deviation over sqrt(n)). A pair is one seed's learned run minus the same
seed's prior-only run (same data order and initial weights).

--all also prints the 300-step ablations run on 3 or more seeds, the rows run on one or two seeds,
the 4-seed rows on all four seeds, and the pairs of one seed and of schema 1 (before the
main-network fix, docs/results/learner-300/).
--default prints only the choice of the default recipe: each recipe minus group-prior, per seed, on
the validation split as each run's last periodic validation read it (its first 64 KB; metrics.jsonl).
--check-recipes also imports rltok and checks that every record of a row named after a recipe has
that recipe's boundary settings and loss weights (fields a record predates count at their defaults).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"
ALL = "--all" in sys.argv[1:]  # also the ablations, the rows on fewer seeds, the schema-1 pairs
LEVEL = 0.00005  # a paired difference that rounds to 0.0000 counts as level


@dataclass(frozen=True)
class Row:
    """One row: the records RESULTS/folder/prefix-sSEED, and the recipe they ran (None: not rl)."""

    label: str
    folder: str
    prefix: str
    recipe: str | None = None  # a recipe name, checked by --check-recipes

    def runs(self, seeds: set[int] | None = None) -> dict[int, dict]:
        """seed -> {"test": eval, "val": eval or None, "config": config} for each record found."""
        found = {}
        for path in sorted((RESULTS / self.folder).glob(f"{self.prefix}-s*")):
            m = re.fullmatch(re.escape(self.prefix) + r"-s(\d+)", path.name)
            if not m or not (path / "test_eval.json").exists():
                continue
            seed = int(m.group(1))
            if seeds is not None and seed not in seeds:
                continue
            val = path / "val_eval.json"
            found[seed] = {
                "test": json.loads((path / "test_eval.json").read_text()),
                "val": json.loads(val.read_text()) if val.exists() else None,
                "config": json.loads((path / "config.json").read_text()),
            }
        if not found:
            raise SystemExit(f"no records for {self.label}: {self.folder}/{self.prefix}-s*")
        return found


def mean_se(xs: list[float], signed: bool = False) -> str:
    """'mean ± standard error' to 4 decimals ('mean' alone for one value), the mean's sign shown
    if `signed`."""
    m = f"{statistics.fmean(xs):{'+' if signed else ''}.4f}"
    return m if len(xs) < 2 else f"{m} ± {statistics.stdev(xs) / math.sqrt(len(xs)):.4f}"


def seeds_text(seeds) -> str:
    s = sorted(seeds)
    return (
        f"{s[0]}-{s[-1]}"
        if len(s) > 2 and s == list(range(s[0], s[-1] + 1))
        else ", ".join(map(str, s))
    )


def direction(diffs: list[float]) -> str:
    """'k of n': the seeds on which learned minus prior-only is below zero (level ones named)."""
    lower = sum(d < -LEVEL for d in diffs)
    level = sum(abs(d) <= LEVEL for d in diffs)
    return f"{lower} of {len(diffs)}" + (f" ({level} level)" if level else "")


# ---- rows ------------------------------------------------------------------------------------


def recipe_rows(recipe: str, folder: str, learned: str, prior_only: str) -> tuple[Row, Row]:
    """A recipe's row and its prior-only row, from the records of two prefixes in one folder."""
    off = recipe + "-prior-only"
    return Row(recipe, folder, learned, recipe), Row(off, folder, prior_only, off)


V2, P600, P400, SMALL = "learner-300-v2", "learner-600", "learner-400", "learner-small-300"
EN_BH, EN_PAPER, V1 = "english-byte-head/runs", "english-paper/runs", "learner-300"
EN_600 = "english-600"  # English at 600 steps: 4.9 MB of its training split, no byte seen twice

RULE = {
    300: Row("word-start rule", V2, "fix-word-start"),
    600: Row("word-start rule", P600, "ws-600"),
}
UNIFORM = {300: Row("uniform", V2, "fix-uniform"), 600: Row("uniform", P600, "uni-600")}

# (learned row, its prior-only row) per budget: the recipes, then the ablations run on 3+ seeds
_MODE_P_300 = Row("mode-prior-only (= mode-neutral-prior-only)", V2, "gp4-cal0", "mode-prior-only")
TABLE_300 = [
    recipe_rows("group-prior", V2, "fix-preset", "fix-prioronly"),
    (Row("mode", V2, "gs4-cal1", "mode"), _MODE_P_300),
    (Row("mode-neutral", V2, "gn4-cal1", "mode-neutral"), _MODE_P_300),
    recipe_rows("byte-head", V2, "lt3x10e", "lt3x10"),
    recipe_rows("byte-head-group-lm", V2, "gl-e", "gl-p"),
    recipe_rows("byte-head-smoothed", V2, "sm-e", "sm-p"),
]
ABLATIONS_300 = [
    Row("ablation: byte-head, group_entropy 0 (rollouts every step)", V2, "ge0", "byte-head"),
    Row("ablation: byte-head-prior-only, policy_lr_mult 1", V2, "lt3", "byte-head-prior-only"),
    Row("ablation: byte-head, rate_control mode", V2, "md-e", "byte-head"),
    Row("ablation: byte-head-prior-only, rate_control mode", V2, "md-p", "byte-head-prior-only"),
    Row("control: byte-head-group-lm, policy weight 1e-5", V2, "ctl", "byte-head-group-lm"),
    Row(
        "ablation: byte-head-smoothed, price in the head's parameters (patch)",
        "learner-300-price",
        "pp-e",
        "byte-head-smoothed",
    ),
    Row("ablation: mode, lm_segmentation sampled", V2, "re4-cal1", "mode"),
    Row("ablation: mode-prior-only, lm_segmentation sampled", V2, "re4-cal0", "mode-prior-only"),
    Row(
        "ablation: group-prior, surprisal_prior 0, group_entropy 0",
        V2,
        "fix-noprior",
        "group-prior",
    ),
    Row("ablation: the same, policy loss off", V2, "fix-noprior-off", "group-prior-prior-only"),
    Row(
        "ablation: the same, rate_control calibrate, policy_lr_mult 1",
        V2,
        "fix-noprior-cal1",
        "group-prior",
    ),
]
TABLE_600 = [
    recipe_rows("group-prior", P600, "preset-600", "preset-off-600"),
    (
        Row("mode-neutral", P600, "gn4-cal1-600", "mode-neutral"),
        Row("mode-prior-only (= mode-neutral-prior-only)", P600, "gp4-cal0-600", "mode-prior-only"),
    ),
    recipe_rows("byte-head", P600, "lt3x10e-600", "lt3x10-600"),
    recipe_rows("byte-head-group-lm", P600, "gl-e-600", "gl-p-600"),
    recipe_rows("byte-head-smoothed", P600, "sm-e-600", "sm-p-600"),
]
# rows on one or two seeds: per-seed values, no standard error
FEW_SEEDS = [
    Row("byte-head, head at 30x lr (policy_lr_mult 30)", V2, "lt3x30e", "byte-head"),
    Row("byte-head, head learns 100 steps (policy_steps 100)", V2, "lt3x10e-ps100", "byte-head"),
    Row("byte-head, head stops at step 50 (policy_steps 50)", V2, "ps50e", "byte-head"),
    Row("byte-head-prior-only, policy_steps 50", V2, "ps50p", "byte-head-prior-only"),
    Row("mode, head at 0.3x lr", V2, "gs4-cal03", "mode"),
    Row("mode-neutral, gamma 0.5", V2, "gn4g5-cal1", "mode-neutral"),
    Row("mode-neutral, every text grouped (group_texts 0)", V2, "gn4g16-cal1", "mode-neutral"),
    Row(
        "600 steps: byte-head-smoothed, head stops at step 300",
        P600,
        "ps-e-600",
        "byte-head-smoothed",
    ),
    Row(
        "600 steps: byte-head-smoothed-prior-only, policy_steps 300",
        P600,
        "ps-p-600",
        "byte-head-smoothed-prior-only",
    ),
]

# the pairs: (title, learned rows, prior-only rows); several learned rows on the same seeds are
# averaged per seed first (one pair per seed), since runs of one seed share data order and weights
PAIRS: list[tuple[str, list[Row], list[Row]]] = []


def pair(title: str, learned, prior) -> None:
    PAIRS.append(
        (
            title,
            learned if isinstance(learned, list) else [learned],
            prior if isinstance(prior, list) else [prior],
        )
    )


def _pairs() -> None:
    t300 = {r.label: (r, p) for r, p in TABLE_300}
    t600 = {r.label: (r, p) for r, p in TABLE_600}
    mode_p = t300["mode"][1]
    pair("300: group-prior", *t300["group-prior"])
    pair("300: mode", t300["mode"][0], mode_p)
    pair("300: mode-neutral", t300["mode-neutral"][0], mode_p)
    pair("300: byte-head", *t300["byte-head"])
    pair("300: byte-head-group-lm", *t300["byte-head-group-lm"])
    pair("300: byte-head-smoothed", *t300["byte-head-smoothed"])
    pair(
        "300: byte-head-group-lm and -smoothed, one pair per seed",
        [t300["byte-head-group-lm"][0], t300["byte-head-smoothed"][0]],
        [t300["byte-head-group-lm"][1], t300["byte-head-smoothed"][1]],
    )
    a = {r.prefix: r for r in ABLATIONS_300}
    pair("300 ablation: byte-head, rollouts every step", a["ge0"], t300["byte-head"][1])
    pair("300 ablation: byte-head, rate_control mode", a["md-e"], a["md-p"])
    pair("300 ablation: mode, LM on sampled segmentations", a["re4-cal1"], a["re4-cal0"])
    pair("300 ablation: group-prior without a prior", a["fix-noprior"], a["fix-noprior-off"])
    pair(
        "300 control: policy weight 1e-5 (byte-head-group-lm)",
        a["ctl"],
        t300["byte-head-group-lm"][1],
    )
    pair("300 ablation: price in the head's parameters", a["pp-e"], t300["byte-head-smoothed"][1])
    few = {r.prefix: r for r in FEW_SEEDS}
    if ALL:
        pair("300 ablation: head stops at step 50", few["ps50e"], few["ps50p"])
    pair(
        "400: byte-head-smoothed",
        *recipe_rows("byte-head-smoothed", P400, "sm-e-400", "sm-p-400"),
    )
    for label in t600:
        pair(f"600: {label}", *t600[label])
    pair(
        "600: byte-head-group-lm and -smoothed, one pair per seed",
        [t600["byte-head-group-lm"][0], t600["byte-head-smoothed"][0]],
        [t600["byte-head-group-lm"][1], t600["byte-head-smoothed"][1]],
    )
    if ALL:
        pair("600 ablation: head stops at step 300", few["ps-e-600"], few["ps-p-600"])
    pair(
        "300, 18.7M parameters (small): byte-head-smoothed",
        *recipe_rows("byte-head-smoothed", SMALL, "smq-e-300", "smq-p-300"),
    )
    for name in ("group-prior", "byte-head", "byte-head-group-lm", "byte-head-smoothed"):
        learned = f"rl-{name}" if name != "group-prior" else "rl-group"
        prior = f"rl-prior-only-{name}" if name != "group-prior" else "rl-prior-only"
        folder = EN_PAPER if name == "group-prior" else EN_BH
        pair(f"English 192: {name}", *recipe_rows(name, folder, learned, prior))
    pair(
        "English 600: byte-head-group-lm",
        *recipe_rows(
            "byte-head-group-lm",
            EN_600,
            "rl-byte-head-group-lm",
            "rl-prior-only-byte-head-group-lm",
        ),
    )
    pair(
        "English 192: byte-head-group-lm and -smoothed, one pair per seed",
        [Row("", EN_BH, "rl-byte-head-group-lm"), Row("", EN_BH, "rl-byte-head-smoothed")],
        [
            Row("", EN_BH, "rl-prior-only-byte-head-group-lm"),
            Row("", EN_BH, "rl-prior-only-byte-head-smoothed"),
        ],
    )
    if not ALL:
        return
    # schema 1 (before the main-network fix): comparable only within a pair
    for title, learned, prior in [
        ("schema 1, 300: group-prior, surprisal cue", "surp", "surp-prioronly"),
        ("schema 1, 300: group-prior, calibrated offset, head at 1x lr", "cal1", "cal-prioronly"),
        ("schema 1, 300: the same, surprisal cue", "surpcal", "surpcal-prioronly"),
        ("schema 1, 300: group-prior, prior fading over 150 steps", "fade150", "fade150-prioronly"),
        ("schema 1, 1,000: calibrated offset, head at 1x lr", "cal1-1000", "cal-prioronly-1000"),
    ]:
        pair(title, Row(learned, V1, learned), Row(prior, V1, prior))


# ---- tables ----------------------------------------------------------------------------------


def bpb(run: dict, split: str) -> float | None:
    if split == "both":
        return None if run["val"] is None else (run["test"]["bpb"] + run["val"]["bpb"]) / 2
    ev = run[split]
    return None if ev is None else ev["bpb"]


def _rate(row: Row, seeds: set[int] | None) -> float:
    return statistics.fmean(r["test"]["rate"] for r in row.runs(seeds).values())


def table_row(label: str, row: Row, seeds, rule: Row, partner: Row | None = None) -> str:
    """One markdown row: seeds, test bpb, minus the rule per seed, rate, recall, rate gaps over 0.01."""
    runs = row.runs(seeds)
    rule_runs = rule.runs()
    test = [r["test"]["bpb"] for r in runs.values()]
    rate = statistics.fmean(r["test"]["rate"] for r in runs.values())
    recall = statistics.fmean(r["test"]["word_start_recall"] for r in runs.values())
    vs_rule = ""
    if row is not rule:
        if set(runs) <= set(rule_runs):  # per seed, on the rule's seeds only
            vs_rule = mean_se(
                [runs[s]["test"]["bpb"] - rule_runs[s]["test"]["bpb"] for s in runs], signed=True
            )
    notes = []
    if partner is not None and abs(rate - _rate(partner, seeds)) > 0.01:
        notes.append(f"{rate - _rate(partner, seeds):+.4f} vs prior-only")
    rule_rate = _rate(rule, None)
    if row is not rule and abs(rate - rule_rate) > 0.01:
        notes.append(f"{rate - rule_rate:+.4f} vs rule")
    return (
        f"| {label} | {seeds_text(runs)} | {mean_se(test)} | "
        f"{vs_rule} | {rate:.4f} | {recall:.4f} | {'; '.join(notes)} |"
    )


HEADER = (
    "| row | seeds | test bpb | minus the rule | rate | word-start recall "
    "| rates differ by > 0.01 |\n|---|---|---|---|---|---|---|"
)


def budget_table(steps: int, pairs, ablations=()) -> None:
    """The recipes and their prior-only rows on seeds 0-2 (the seeds uniform and the rule have),
    then the ablations, then the rows that have a seed 3 on all their seeds."""
    print(f"\n**{steps} steps** (tiny preset, embedded corpus, test split)\n")
    print(HEADER)
    common = {0, 1, 2}
    rule = RULE[steps]
    more, printed = [], set()
    for learned, prior in pairs:
        for row, partner in ((learned, prior), (prior, None)):
            if id(row) in printed:
                continue
            printed.add(id(row))
            print(table_row(row.label, row, common, rule, partner))
            more += [row] if len(row.runs()) > 3 else []
    for row in ablations:
        print(table_row(row.label, row, common, rule))
        more += [row] if len(row.runs()) > 3 else []
    for row in more if ALL else []:
        print(table_row(f"{row.label}, seeds {seeds_text(row.runs())}", row, None, rule))
    for row in (UNIFORM[steps], rule):
        print(table_row(row.label, row, common, rule))


def other_table() -> None:
    print(
        "\n**Other budgets and scales** (test split): 400 steps, tiny, embedded; 18.7M: the small"
        " preset's model, tiny's batch, 300 steps, embedded; English: tiny, 192 steps (600 where"
        " said)\n"
    )
    print(HEADER)
    ws400 = Row("word-start rule", P400, "ws-400")
    r, p = Row("", P400, "sm-e-400"), Row("", P400, "sm-p-400")
    print(table_row("400: byte-head-smoothed", r, None, ws400, p))
    print(table_row("400: byte-head-smoothed-prior-only", p, None, ws400))
    print(table_row("400: word-start rule", ws400, None, ws400))
    wsq = Row("", SMALL, "wsq-300")
    r, p = Row("", SMALL, "smq-e-300"), Row("", SMALL, "smq-p-300")
    print(table_row("18.7M: byte-head-smoothed", r, None, wsq, p))
    print(table_row("18.7M: byte-head-smoothed-prior-only", p, None, wsq))
    print(table_row("18.7M: word-start rule", wsq, None, wsq))
    en_rule = Row("", EN_PAPER, "word-start")
    for name, learned, prior, folder in [
        ("group-prior", "rl-group", "rl-prior-only", EN_PAPER),
        ("byte-head", "rl-byte-head", "rl-prior-only-byte-head", EN_BH),
        ("byte-head-group-lm", "rl-byte-head-group-lm", "rl-prior-only-byte-head-group-lm", EN_BH),
        ("byte-head-smoothed", "rl-byte-head-smoothed", "rl-prior-only-byte-head-smoothed", EN_BH),
    ]:
        r, p = Row("", folder, learned), Row("", folder, prior)
        print(table_row(f"English: {name}", r, None, en_rule, p))
        print(table_row(f"English: {name}-prior-only", p, None, en_rule))
    print(table_row("English: paper", Row("", EN_PAPER, "rl"), None, en_rule))
    print(table_row("English: uniform", Row("", EN_PAPER, "uniform"), None, en_rule))
    print(table_row("English: word-start rule", en_rule, None, en_rule))
    en_rule_600 = Row("", EN_600, "word-start")
    r, p = (
        Row("", EN_600, "rl-byte-head-group-lm"),
        Row("", EN_600, "rl-prior-only-byte-head-group-lm"),
    )
    print(table_row("English 600: byte-head-group-lm", r, None, en_rule_600, p))
    print(table_row("English 600: byte-head-group-lm-prior-only", p, None, en_rule_600))
    print(table_row("English 600: word-start rule", en_rule_600, None, en_rule_600))


def few_seeds_table() -> None:
    print("\n**Rows on one or two seeds** (tiny, embedded, 300 steps unless said; test split)\n")
    print("| row | records | test bpb per seed | rate | word-start recall |")
    print("|---|---|---|---|---|")
    for row in FEW_SEEDS:
        runs = row.runs()
        per = ", ".join(f"{r['test']['bpb']:.4f} (s{s})" for s, r in runs.items())
        rate = statistics.fmean(r["test"]["rate"] for r in runs.values())
        recall = statistics.fmean(r["test"]["word_start_recall"] for r in runs.values())
        print(f"| {row.label} | {row.folder}/{row.prefix} | {per} | {rate:.4f} | {recall:.4f} |")


def diffs(learned: list[Row], prior: list[Row], split: str) -> dict[int, float]:
    """seed -> learned minus prior-only (averaged over the rows given), for seeds all rows have."""
    lr = [r.runs() for r in learned]
    pr = [r.runs() for r in prior]
    seeds = set.intersection(*(set(x) for x in lr + pr))
    out = {}
    for s in sorted(seeds):
        d = [
            bpb(a[s], split) - bpb(b[s], split)
            for a, b in zip(lr, pr)
            if bpb(a[s], split) is not None and bpb(b[s], split) is not None
        ]
        if len(d) == len(lr):
            out[s] = statistics.fmean(d)
    return out


def rate_gap(learned: list[Row], prior: list[Row]) -> float:
    lr = [r.runs() for r in learned]
    pr = [r.runs() for r in prior]
    seeds = set.intersection(*(set(x) for x in lr + pr))
    return statistics.fmean(
        a[s]["test"]["rate"] - b[s]["test"]["rate"] for a, b in zip(lr, pr) for s in seeds
    )


def pairs_table() -> None:
    print(
        "\n**Paired differences**, learned minus prior-only, seed by seed (bpb). Cells: mean ± s.e.;"
        " on how many seeds the learned row is lower. Rate gap (test): bold over 0.01.\n"
    )
    print("| pair | test, per seed | test | validation | both splits | rate gap |")
    print("|---|---|---|---|---|---|")
    for title, learned, prior in PAIRS:
        cells = []
        for split in ("test", "val", "both"):
            d = diffs(learned, prior, split)
            cells.append(
                f"{mean_se(list(d.values()), signed=True)}; {direction(list(d.values()))}"
                if d
                else ""
            )
        per = ", ".join(f"{v:+.4f}" for v in diffs(learned, prior, "test").values())
        gap = rate_gap(learned, prior)
        gap_text = f"**{gap:+.4f}**" if abs(gap) > 0.01 else f"{gap:+.4f}"
        print(f"| {title} | {per} | {' | '.join(cells)} | {gap_text} |")
    print(
        '\n"One pair per seed": per seed, the mean of the two recipes\' differences; runs of one'
        " seed share data order and initial weights, so they are not independent pairs."
    )


def rollouts_stop() -> None:
    """The last logged step at which the group estimator drew rollouts, in the 600-step byte-head runs."""
    last = []
    for seed, _ in sorted(Row("", P600, "lt3x10e-600").runs().items()):
        path = RESULTS / P600 / f"lt3x10e-600-s{seed}" / "metrics.jsonl"
        steps = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        last.append(max(m["step"] for m in steps if m.get("rollouts", 0) > 0))
    print(
        f"\nbyte-head, 600 steps: the last logged step with rollouts is {', '.join(map(str, last))}"
        " (seeds 0-2; `rollouts` in metrics.jsonl)."
    )


def check_recipes() -> None:
    """Every record of a recipe-named row has that recipe's settings (ablations: all but the one)."""
    import dataclasses

    from rltok.config import BoundaryConfig, LossWeights, preset
    from rltok.recipes import recipe

    rows = [r for pr in TABLE_300 + TABLE_600 for r in pr if r] + [
        r for _, ls, ps in PAIRS for r in ls + ps if r.recipe
    ]
    bad = []
    for row in rows:
        if not row.recipe or row in ABLATIONS_300 or row in FEW_SEEDS:
            continue
        want = recipe(row.recipe).apply(preset("tiny"))
        for seed, run in row.runs().items():
            cfg = run["config"]
            got_b = dataclasses.asdict(BoundaryConfig.from_dict(cfg["boundaries"]))
            got_l = {**dataclasses.asdict(LossWeights()), **cfg["loss"]}
            diff = {
                k: (got_b[k], v)
                for k, v in dataclasses.asdict(want.boundaries).items()
                if got_b[k] != v
            }
            diff |= {
                k: (got_l[k], v) for k, v in dataclasses.asdict(want.loss).items() if got_l[k] != v
            }
            if diff:
                bad.append(f"{row.folder}/{row.prefix}-s{seed} is not {row.recipe}: {diff}")
    print(
        "\n" + ("\n".join(bad) if bad else "recipes checked: every recipe row matches its recipe")
    )


def last_validation(row: Row) -> dict[int, tuple[float, float]]:
    """seed -> (val_bpb, val_rate) of the run's last periodic validation (metrics.jsonl)."""
    found = {}
    for seed in row.runs():
        lines = (RESULTS / row.folder / f"{row.prefix}-s{seed}" / "metrics.jsonl").read_text()
        last = [r for r in map(json.loads, lines.splitlines()) if "val_bpb" in r][-1]
        found[seed] = (last["val_bpb"], last["val_rate"])
    return found


def default_table() -> None:
    """Each recipe minus the default (group-prior), paired by seed, on the validation split."""
    print(
        "\n| budget | recipe | seeds | val bpb minus group-prior | lower on | its rate |\n"
        "|---|---|---|---|---|---|"
    )
    for steps, table in ((300, TABLE_300), (600, TABLE_600)):
        default = last_validation(table[0][0])
        for learned, _ in table[1:]:
            got = last_validation(learned)
            seeds = sorted(set(got) & set(default))
            d = [got[s][0] - default[s][0] for s in seeds]
            rate = mean_se([got[s][1] for s in seeds])
            print(
                f"| {steps} | {learned.label} | {seeds_text(seeds)} | {mean_se(d, signed=True)} | "
                f"{direction(d)} | {rate} |"
            )
    rates = {s: r for s, (_, r) in last_validation(TABLE_600[0][0]).items()}
    print(f"\ngroup-prior's own rate at 600 steps: {mean_se(list(rates.values()))}")


def main() -> None:
    if "--default" in sys.argv[1:]:
        default_table()
        return
    _pairs()
    print(
        "Made by `python scripts/learner_tables.py` from docs/results/. ± is one standard error"
        " over seeds."
    )
    budget_table(300, TABLE_300, ABLATIONS_300 if ALL else ())
    budget_table(600, TABLE_600)
    other_table()
    if ALL:
        few_seeds_table()
    pairs_table()
    rollouts_stop()
    if "--check-recipes" in sys.argv[1:]:
        check_recipes()


if __name__ == "__main__":
    main()
