"""The shape the code keeps: the trainer, the objective, evaluation and the command line never read
an RL setting (what they need from a method comes through the boundary interface's hooks), and no
code outside rltok/model asks a network what kind it is (every network answers the model protocol)."""

import dataclasses
import re
from pathlib import Path

from rltok.config import BoundaryConfig

ROOT = Path(__file__).parents[1] / "rltok"
GENERIC = [
    "step.py",
    "objective.py",
    "evaluate.py",
    "train.py",
    *(f"cli/{p.name}" for p in (ROOT / "cli").glob("*.py")),
]
# the settings every method may read: which method, its rate, the BPE's size; the rest are the RL
# policy's parts (sub-sections of the boundary config)
SHARED = {"method", "target_rate", "bpe_vocab"}


def test_no_rl_setting_is_read_outside_the_boundary_methods():
    parts = [f for f in dataclasses.fields(BoundaryConfig) if f.name not in SHARED]
    assert parts and all(dataclasses.is_dataclass(f.default_factory) for f in parts)
    names = "|".join(f.name for f in parts)
    fields = "|".join({g.name for f in parts for g in dataclasses.fields(f.default_factory)})
    types = "|".join(f.default_factory.__name__ for f in parts)
    reading = re.compile(rf"boundaries\.({names})\b|\b({names})\.({fields})\b|\b({types})\b")
    found = {
        (name, match.group(0))
        for name in GENERIC
        for match in reading.finditer((ROOT / name).read_text())
    }
    assert not found, found


def test_no_code_outside_the_model_package_sniffs_a_networks_kind():
    sniffing = re.compile(
        r"(hasattr|getattr)\((self\.)?model\b"
        r"|isinstance\(\w*model\w*, \(?(ByteUNet|FlatByteTransformer|BPETokenTransformer)"
    )
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in ROOT.rglob("*.py")
        if "model" not in path.relative_to(ROOT).parts[:1]
        for match in sniffing.finditer(path.read_text())
    ]
    assert not found, found
