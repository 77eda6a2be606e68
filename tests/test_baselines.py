"""Every baseline trains, round-trips through a checkpoint, and (where it is controlled) holds the rate."""

import json

import pytest
import torch
from conftest import SMOKE

import rltok
from rltok.bpe import StoredBPE
from rltok.checkpoint import load
from rltok.cli import main
from rltok.text import encode, space_like

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


@pytest.mark.parametrize("method", ["bpe", "bpe-lm"])
def test_bpe_methods_keep_their_tokenizer_through_resume_eval_and_segment(tmp_path, capsys, method):
    out = tmp_path / method
    assert (
        main(
            [
                *SMOKE,
                "--boundaries",
                method,
                "--bpe-vocab",
                "1024",
                "--max-steps",
                "6",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert main([*SMOKE, "--out", str(out), "--resume", "--max-steps", "12"]) == 0
    model = load(out)
    assert model.config.boundaries.bpe_vocab == 1024
    stored = next(m for m in model.modules() if isinstance(m, StoredBPE)).get()
    assert stored.vocab_size == 1024 and stored.to_bytes() == (out / "bpe.json").read_bytes()
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(out), "--max-bytes", "8192", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # a 1024-token BPE: about 2.5 bytes a token
    assert 0.2 < scores["rate"] < 0.6 and 0 < scores["bpb"] < 8
    text = "To be, or not to be: that is the question."
    assert main(["segment", "--checkpoint", str(out), "--text", text, "--format", "json"]) == 0
    chunks = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["chunks"]
    assert "".join(chunks) == text and 5 < len(chunks) < len(text)


def test_the_word_start_rule_scores_a_perfect_word_start_recall_and_precision():
    # one definition of a word start (rltok.text) serves the rule and the metric that scores it
    from rltok.data import embedded_corpus
    from rltok.evaluate import evaluate
    from rltok.pretrained import build_model

    cfg = rltok.preset("smoke")
    cfg.boundaries.method = "word-start"
    scores = evaluate(build_model(cfg.validate()), embedded_corpus().test, 128, max_bytes=20_000)
    assert scores["word_start_recall"] == 1.0 and scores["word_start_precision"] == 1.0
