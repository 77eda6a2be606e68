"""The analysis scripts under benchmarks/ measure what they claim."""

import sys
from pathlib import Path

import torch

import rltok
from rltok.data import embedded_corpus

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from boundary_value import measure  # noqa: E402


def test_boundary_value_sees_no_worth_in_boundaries_when_the_main_network_is_cut_off(smoke_run):
    docs = embedded_corpus().test
    model = rltok.load(smoke_run)
    connected = measure(model, docs, n_batches=2)
    with torch.no_grad():
        model.up.weight.zero_()  # the main network's output no longer reaches the bytes
    cut = measure(model, docs, n_batches=2)

    assert len(set(cut["bpb_by_segmentation"].values())) == 1
    assert all(v["mean"] == 0 and v["standard_error"] == 0 for v in cut["one_more_boundary_nats"].values())
    assert len(set(connected["bpb_by_segmentation"].values())) > 1
    assert any(v["mean"] != 0 for v in connected["one_more_boundary_nats"].values())
    assert cut["return_std_nats"] > 0  # the return still varies: the estimator would chase noise


def test_boundary_value_word_starts_are_the_bytes_after_whitespace():
    from boundary_value import forced_segmentations

    ids = rltok.encode("To be,  or\nnot")[None]
    masks = forced_segmentations(ids, 0.2)
    ends = [i - 1 for i in masks["word start"][0].nonzero().flatten().tolist() if i > 0]  # byte index, BOS dropped
    assert bytes(b"To be,  or\nnot"[i] for i in ends) == b"bon"  # b, o, n: after a space, after two, after a newline
    assert masks["whitespace"][0, 1:].sum() == 4 and masks["word start"][0, 0] == 1  # BOS is always an end


def test_imperfect_rule_degrades_the_word_start_rule_as_described():
    from imperfect_rule import LateWordStart, NoisyWordStart, word_starts

    from rltok.boundaries.rules import WordStartBoundaries
    from rltok.config import BoundaryConfig

    ids = torch.tensor([list(embedded_corpus().val[0][:20000])])
    x = torch.zeros(1, ids.size(1), 8)
    exact = WordStartBoundaries(8, BoundaryConfig())(x, ids, None).boundaries.bool()
    assert torch.equal(exact[:, 1:], word_starts(ids)[:, 1:])  # the same rule as the library's

    noisy = NoisyWordStart(8, BoundaryConfig())(x, ids, None, noise=torch.rand(ids.shape)).boundaries.bool()
    starts = word_starts(ids)
    recall = (noisy & starts).sum() / starts.sum()
    precision = (noisy & starts).sum() / noisy.sum()
    assert abs(recall - NoisyWordStart.keep) < 0.05 and abs(precision - 0.55) < 0.05
    assert abs(noisy.float().mean() - 0.2) < 0.02

    late = LateWordStart(8, BoundaryConfig())
    late.switch = 2
    late.train()
    first = [late(x, ids, None).boundaries for _ in range(2)]
    assert all(abs(b[:, 1:].float().mean() - 0.2) < 0.01 and not torch.equal(b.bool(), exact) for b in first)
    assert torch.equal(late(x, ids, None).boundaries.bool(), exact)  # the third training step: the rule
    late.eval()
    late.training_steps = 0
    assert torch.equal(late(x, ids, None).boundaries.bool(), exact)  # evaluation always sees the rule
