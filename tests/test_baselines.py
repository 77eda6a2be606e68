"""Every baseline trains, round-trips through a checkpoint, and (where it is controlled) holds the rate."""

import json

import pytest
import torch

from conftest import SMOKE
from rltok.boundaries.rules import space_like
from rltok.cli import main
from rltok.data import encode

CONTROLLED = ["uniform", "stride", "entropy", "nawrot", "hnet"]


@pytest.mark.parametrize("method", CONTROLLED)
def test_rate_is_held_after_a_short_run(tmp_path, capsys, method):
    out = tmp_path / method
    assert main([*SMOKE, "--boundaries", method, "--max-steps", "150", "--out", str(out)]) == 0
    assert main(["eval", "--checkpoint", str(out), "--max-bytes", "32768", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert abs(scores["rate"] - 0.2) <= 0.02, scores
    assert scores["bpb"] < 5.0  # it learned something: chance is 8 bits


def test_whitespace_rule_ends_chunks_only_after_words(tmp_path, capsys):
    out = tmp_path / "whitespace"
    assert main([*SMOKE, "--boundaries", "whitespace", "--max-steps", "5", "--out", str(out)]) == 0
    text = "To be, or not to be: that is the question.\nWhether 'tis nobler"
    assert main(["segment", "--checkpoint", str(out), "--text", text, "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    ids = encode(text)[1:]
    ends = torch.tensor(result["boundaries"]).bool()
    previous = torch.cat([torch.tensor([True]), space_like(ids)[:-1]])
    assert torch.equal(ends, space_like(ids) & ~previous)
    assert result["chunks"][:4] == ["To ", "be,", " or ", "not "]
