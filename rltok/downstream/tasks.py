"""Multiple-choice tasks: items, their JSONL files, and where prepared tasks are found.

An item is a list of options, each a (context, continuation) pair, and the index of the right one.
Only the continuation is scored, given its context. Ordinary multiple choice shares one context
(`{"context": C, "options": [...], "answer": i}`); WinoGrande-style pairs share the continuation and
differ in the context (`{"contexts": [...], "continuation": S, "answer": i}`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rltok.errors import UserError


@dataclass(frozen=True)
class Item:
    """One question: its options as (context, continuation) pairs, and the index of the right one."""

    options: tuple[tuple[str, str], ...]
    answer: int

    def to_json(self) -> dict:
        """The item as one JSONL object, in the shorter of the two forms where it fits."""
        contexts = {context for context, _ in self.options}
        continuations = {continuation for _, continuation in self.options}
        if len(contexts) == 1:
            return {
                "context": self.options[0][0],
                "options": [c for _, c in self.options],
                "answer": self.answer,
            }
        if len(continuations) == 1:
            return {
                "contexts": [c for c, _ in self.options],
                "continuation": self.options[0][1],
                "answer": self.answer,
            }
        return {"pairs": [list(pair) for pair in self.options], "answer": self.answer}


def item_from_json(obj: object) -> Item:
    """An Item from one parsed JSONL object; ValueError says what is wrong with it."""
    if not isinstance(obj, dict):
        raise ValueError("an item must be a JSON object")
    if "options" in obj:
        context = obj.get("context", "")
        options = [(context, option) for option in obj["options"]]
    elif "contexts" in obj:
        options = [(context, obj.get("continuation")) for context in obj["contexts"]]
    elif "pairs" in obj:
        options = [
            tuple(pair) if isinstance(pair, list) and len(pair) == 2 else (None, None)
            for pair in obj["pairs"]
        ]
    else:
        raise ValueError(
            'an item needs "options" (with a "context"), "contexts" (with a "continuation") or "pairs"'
        )
    if len(options) < 2:
        raise ValueError("an item needs at least two options")
    if not all(isinstance(c, str) and isinstance(s, str) for c, s in options):
        raise ValueError("contexts and continuations must be strings")
    if not all(s for _, s in options):
        raise ValueError("a continuation is empty: there would be nothing to score")
    answer = obj.get("answer")
    if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(options):
        raise ValueError(
            f'"answer" must be the index of an option (0 to {len(options) - 1}), got {answer!r}'
        )
    return Item(tuple(options), answer)


def read_task(path: Path) -> list[Item]:
    """The items of a JSONL task file; a malformed line is named by file and line number."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(
            f"cannot read the task file {path} ({e}); it must be UTF-8 JSONL, one item per line"
        ) from e
    items = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            items.append(item_from_json(json.loads(line)))
        except ValueError as e:  # json.JSONDecodeError is a ValueError
            raise UserError(
                f"{path} line {number} is not a valid item ({e}); fix or remove that line"
            ) from e
    if not items:
        raise UserError(f"{path} holds no items; write one JSON object per line")
    return items


def write_task(path: Path, items: list[Item]) -> None:
    """Write items as JSONL, one object per line."""
    path.write_text(
        "".join(json.dumps(item.to_json(), ensure_ascii=False) + "\n" for item in items),
        encoding="utf-8",
    )
