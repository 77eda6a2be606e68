"""`rltok compare`: a suite of boundary methods trained on one corpus and budget, and its results.
suites.py the suites, stats.py the means and verdicts over seeds and the paired reading, report.py
the tables and plots, run.py the driver; imports point up that way (suites and stats at the bottom,
the driver on top)."""

from rltok.compare.report import (
    downstream_table,
    markdown_table,
    paired_section,
    paired_table,
    plot,
)
from rltok.compare.run import compare
from rltok.compare.stats import aggregate, aggregate_downstream, best_rules, paired

__all__ = [
    "aggregate",
    "aggregate_downstream",
    "best_rules",
    "compare",
    "downstream_table",
    "markdown_table",
    "paired",
    "paired_section",
    "paired_table",
    "plot",
]
