"""It learns: a short RL run on the embedded corpus moves whitespace recall from chance to word-like."""

import pytest

from rltok.config import preset
from rltok.data import embedded_corpus
from rltok.evaluate import evaluate
from rltok.model import build_model
from rltok.train import train


@pytest.mark.slow
def test_rl_policy_discovers_whitespace(tmp_path):
    corpus = embedded_corpus()
    cfg = preset("tiny")
    cfg.train.max_steps = 120
    cfg.loss.rate = 0.01  # the paper's rate weight: a looser rate lets whitespace be found within 120 steps
    cfg.train.eval_every = 1000
    test_bytes = 32768

    before = evaluate(build_model(cfg), corpus.test, cfg.train.seq_len, max_bytes=test_bytes)
    assert before["whitespace_recall"] < 0.35  # chance: about the target rate

    summary = train(cfg, corpus, tmp_path / "run", progress=False)
    assert not summary["interrupted"]
    import rltok

    after = evaluate(rltok.load(tmp_path / "run"), corpus.test, cfg.train.seq_len, max_bytes=test_bytes)
    assert after["whitespace_recall"] >= 0.8, after
    assert abs(after["rate"] - 0.2) < 0.06, after
    assert after["bpb"] < before["bpb"]
