"""`rltok data prepare bigbench`: multiple-choice tasks from the BIG-bench 1.0.0 source distribution.

pip downloads the sdist (358 MB) without installing it; the archive is read as a stream and only the
task.json files named below are kept, each turned into a JSONL task file. A prompt is built the way
BIG-bench's JSON tasks build it (task prefix, "\\nQ: " input, the choices when the task appends them,
"\\nA: "), and each answer option is a continuation. WinoGrande-style pairs come from the
natural-instructions subtask that writes both twin sentences with their answers: the blank is filled
with each candidate and the rest of the sentence is scored (WinoGrande's partial scoring).
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from pathlib import Path

from rltok.data.corpora import MANIFEST, _pip_download, _say, build_cached
from rltok.downstream.tasks import Item, write_task

BIGBENCH = "bigbench==1.0.0"
MEMBER = "bigbench-1.0.0/bigbench/benchmark_tasks/{}/task.json"
MULTIPLE_CHOICE = ("hyperbaton", "social_iqa", "winowhy", "anachronisms", "physical_intuition")
WINOGRANDE = "natural_instructions/subtask029_winogrande_full_object"
TASKS = (*MULTIPLE_CHOICE, "winogrande")
TWIN = re.compile(
    r"Sentence 1: (?P<s1>.+?)\s*\nAnswer1: (?P<a1>.+?)\.?\s*\n"
    r"Sentence 2: (?P<s2>.+?)\s*\nAnswer2: (?P<a2>.+?)\.?\s*$",
    re.S,
)


def multiple_choice_items(task: dict) -> list[Item]:
    """Items of a BIG-bench JSON task with target_scores; items without one best option are left out."""
    prefix = task.get("task_prefix", "")
    input_prefix = task.get("example_input_prefix", "\nQ: ")
    output_prefix = task.get("example_output_prefix", "\nA: ")
    choice_prefix = task.get("choice_prefix", "\n  choice: ")
    items = []
    for example in task["examples"]:
        scores = example.get("target_scores")
        if not scores:
            continue
        best = max(scores.values())
        if list(scores.values()).count(best) != 1:
            continue
        choices = list(scores)
        listed = (
            "".join(choice_prefix + choice for choice in choices)
            if task.get("append_choices_to_input", True)
            else ""
        )
        context = (prefix + input_prefix + example["input"] + listed + output_prefix).lstrip("\n")
        items.append(
            Item(
                tuple((context, choice) for choice in choices),
                choices.index(next(c for c in choices if scores[c] == best)),
            )
        )
    return items


def winogrande_items(task: dict) -> list[Item]:
    """Two items per pair of twin sentences: each fills its blank with both candidates."""
    items = []
    for example in task["examples"]:
        twin = TWIN.search(example["target"][0])
        if twin is None:
            continue
        candidates = (twin["a1"].strip(), twin["a2"].strip())
        for sentence, answer in ((twin["s1"], 0), (twin["s2"], 1)):
            if sentence.count("_") != 1 or candidates[0] == candidates[1]:
                continue
            before, after = (part.strip() for part in sentence.split("_"))
            if not after:
                continue
            items.append(
                Item(tuple((f"{before} {c}".strip(), " " + after) for c in candidates), answer)
            )
    return items


def extract(archive: Path, folder: Path) -> dict:
    """Write folder/<task>.jsonl for every task in TASKS from the sdist; the manifest's task entries."""
    wanted = {MEMBER.format(name): name for name in MULTIPLE_CHOICE} | {
        MEMBER.format(WINOGRANDE): "winogrande"
    }
    found = {}
    # a stream: the 358 MB archive is read once, front to back
    with tarfile.open(archive, "r|gz") as tar:
        for member in tar:
            name = wanted.get(member.name)
            if name is None:
                continue
            task = json.load(tar.extractfile(member))
            items = winogrande_items(task) if name == "winogrande" else multiple_choice_items(task)
            path = folder / f"{name}.jsonl"
            write_task(path, items)
            data = path.read_bytes()
            found[name] = {
                "source": member.name,
                "examples": len(task["examples"]),
                "items": len(items),
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
            _say(f"{name}: {len(items)} items")
    missing = sorted(set(TASKS) - set(found))
    if missing:
        raise ValueError(f"{archive.name} lacks the tasks {', '.join(missing)}")
    return found


def prepare_bigbench(cache: str | Path | None = None, force: bool = False) -> Path:
    """The folder of prepared BIG-bench tasks (JSONL and manifest.json), built now unless cached."""

    def build(folder: Path, downloads: Path) -> None:
        archive = _pip_download(BIGBENCH, downloads)
        digest = hashlib.sha256()
        with archive.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        tasks = extract(archive, folder)
        manifest = {
            "name": "bigbench",
            "source": BIGBENCH,
            "archive": archive.name,
            "archive_sha256": digest.hexdigest(),
            "tasks": tasks,
        }
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")

    return build_cached("bigbench", cache, force, build)
