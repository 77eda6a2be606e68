"""Downstream evaluation: zero-shot multiple choice scored by log-likelihood and bits per byte."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rltok.data.corpora import MANIFEST, cache_dir
from rltok.downstream.agreement import agreement_items
from rltok.downstream.score import continuation_nll, score_items
from rltok.downstream.tasks import Item, read_task, write_task
from rltok.errors import UserError

BUILT_IN = {"agreement": agreement_items}


def prepared_tasks(cache: str | Path | None = None) -> dict[str, Path]:
    """The task files `rltok data prepare bigbench` left in the cache, by name."""
    folder = (Path(cache).expanduser() if cache else cache_dir()) / "bigbench"
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return {}
    return {name: folder / f"{name}.jsonl" for name in json.loads(manifest.read_text())["tasks"]}


def load_task(name: str, cache: str | Path | None = None) -> list[Item]:
    """The items of a built-in task, a prepared one, or a JSONL file given by its path."""
    if name in BUILT_IN:
        return BUILT_IN[name]()
    prepared = prepared_tasks(cache)
    if name in prepared:
        path = prepared[name]
        expected = json.loads((path.parent / MANIFEST).read_text())["tasks"][name]["sha256"]
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != expected:
            raise UserError(
                f"{path} no longer matches the sha256 in its {MANIFEST}; prepare it again with "
                "`rltok data prepare bigbench --force`"
            )
        return read_task(path)
    if name.endswith(".jsonl") or Path(name).is_file():
        if not Path(name).is_file():
            raise UserError(f"the task file {name} does not exist; check the path")
        return read_task(Path(name))
    known = ", ".join([*BUILT_IN, *prepared]) or "none"
    hint = (
        ""
        if prepared
        else "; `rltok data prepare bigbench` adds hyperbaton, social_iqa, winowhy, winogrande and more"
    )
    raise UserError(
        f"unknown task {name!r}: the tasks here are {known} (or pass a .jsonl file){hint}"
    )


__all__ = [
    "BUILT_IN",
    "Item",
    "continuation_nll",
    "load_task",
    "prepared_tasks",
    "read_task",
    "score_items",
    "write_task",
]
