"""The way in stays short and whole: the README fits in 15,000 bytes, links every docs page, and no
relative link in the README or docs points at a file or heading that does not exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_readme_is_at_most_15000_bytes():
    assert len((ROOT / "README.md").read_bytes()) <= 15_000


def test_every_docs_page_is_linked_from_the_readme():
    linked = {
        (ROOT / target).resolve() for target in LINK.findall((ROOT / "README.md").read_text())
    }
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"


def test_no_relative_link_is_dead():
    dead = []
    for page in _pages():
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                dead.append(f"{page.name}: {target}")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                dead.append(f"{page.name}: {target} (no such heading)")
    assert not dead, dead


def test_the_link_check_sees_a_dead_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[here](missing.md) [there](#nowhere)\n# Somewhere\n")
    targets = LINK.findall(page.read_text())
    assert targets == ["missing.md", "#nowhere"]
    assert "nowhere" not in _anchors(page) and "somewhere" in _anchors(page)


def test_the_results_reading_is_in_results_md_and_quotes_only_what_its_tables_hold():
    """docs/results/reading.md, the one hand-written part of RESULTS.md, is there as written, and
    every "mean ± deviation" it quotes is a row of RESULTS.md's own tables."""
    results = (ROOT / "docs" / "RESULTS.md").read_text()
    reading = (ROOT / "docs" / "results" / "reading.md").read_text().rstrip()
    assert reading in results, "RESULTS.md is stale: run scripts/results_report.py"
    tables = results.replace(reading, "")
    quoted = re.findall(r"\d\.\d{4} ± \d\.\d{4}", reading)
    assert quoted and not [q for q in quoted if q not in tables]


def test_the_learner_report_holds_the_tables_its_script_makes_from_the_records():
    """Every table row of docs/learner.md's tables is what scripts/learner_tables.py prints from
    the run records in docs/results/ now."""
    import subprocess
    import sys

    made = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "learner_tables.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    rows = [line for line in made if line.startswith("|") and not line.startswith("|---")]
    report = (ROOT / "docs" / "learner.md").read_text()
    assert len(rows) > 40 and not [row for row in rows if row not in report]
    assert len(report.encode()) <= 20_000


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and "---|" not in line]


def test_the_without_spaces_page_holds_the_tables_its_script_makes_from_the_records():
    """The tables of docs/without-spaces.md are what scripts/no_space_tables.py prints from the run
    records now: every test-split table of the 192-step Chinese runs, the validation split's
    pairs with the prior-only rows, and the rows of the other folders."""
    import subprocess
    import sys

    page = (ROOT / "docs" / "without-spaces.md").read_text()
    quoted = []
    for folder, whole in [
        ("chinese-192", True),
        ("chinese-400", False),
        ("english-nospace-192", False),
    ]:
        made = subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts" / "no_space_tables.py"),
                f"docs/results/{folder}",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
        test, val = made.split("## val split")
        tables = test.split("\n\n") if whole else [test.split("\n\n")[1]]
        if whole:
            tables.append(val.split("\n\n")[2])  # the validation pairs with the prior-only rows
        quoted += [row for table in tables for row in _table_rows(table)]
    assert len(quoted) > 60 and not [row for row in quoted if row not in page]
