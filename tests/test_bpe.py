"""The byte-level BPE: training, calibration, causal token starts, storage, and the BPE-token model."""

import math

import torch
import torch.nn.functional as F
from conftest import small_bpe, smoke_model
from hypothesis import given, settings
from hypothesis import strategies as st

from rltok.bpe import ByteBPE, fit_bpe, train_bpe
from rltok.data import embedded_corpus
from rltok.layers.blocks import rms_norm
from rltok.text import BOS

HELD_OUT = embedded_corpus().test[0][:20_000]


def test_truncating_a_bpe_equals_training_a_smaller_one():
    big, small = (
        train_bpe(embedded_corpus().train[:3], 1024),
        train_bpe(embedded_corpus().train[:3], 600),
    )
    cut = big.truncated(600)
    assert cut.tokens == small.tokens and cut.merges == small.merges


def test_encoding_round_trips_any_bytes():
    bpe = small_bpe()
    data = HELD_OUT[:2000] + bytes(range(256)) + "naïve — ünïcödé".encode() + b"\xff\xfe\x80"
    ids, ends = bpe.encode(data)
    assert b"".join(bpe.tokens[i] for i in ids) == data
    assert ends[-1] == len(data) and ends == sorted(ends)


@settings(max_examples=30, deadline=None)
@given(st.binary(min_size=1, max_size=200), st.integers(0, 199))
def test_causal_starts_of_a_prefix_are_a_prefix_of_the_starts(data, cut):
    bpe = small_bpe()
    ids = list(data)
    cut = min(cut, len(ids))
    assert bpe.causal_starts(ids[:cut]) == bpe.causal_starts(ids)[:cut]


def test_causal_starts_agree_with_bpe_token_starts_on_held_out_text():
    bpe = small_bpe()
    causal = bpe.causal_starts(list(HELD_OUT))
    _, ends = bpe.encode(HELD_OUT)
    starts = {0, *ends[:-1]}
    hits = sum(causal[i] for i in starts)
    # recall and precision of token starts
    assert hits / len(starts) > 0.8 and hits / sum(causal) > 0.8
    assert abs(sum(causal) / len(causal) - len(ends) / len(HELD_OUT)) < 0.03  # about the same rate


def test_bos_starts_a_token_and_resets_the_walk():
    bpe = small_bpe()
    word = list(b" the")
    assert bpe.causal_starts(word + [BOS] + word) == [1, 0, 0, 0, 1, 1, 0, 0, 0]


def test_calibration_hits_the_target_rate():
    docs = embedded_corpus().train[:6]
    bpe = fit_bpe(docs, target_rate=0.3)
    assert abs(bpe.rate(HELD_OUT) - 0.3) < 0.03
    assert fit_bpe(docs, target_rate=0.3, vocab_size=700).vocab_size == 700


def test_serialisation_round_trips():
    bpe = small_bpe()
    again = ByteBPE.from_bytes(bpe.to_bytes())
    assert again.tokens == bpe.tokens and again.merges == bpe.merges


def test_bpe_boundaries_are_causal_on_text():
    model = smoke_model("bpe")
    text = torch.tensor([[BOS, *HELD_OUT[:300]]])
    for t in (10, 57, 200):
        changed = torch.cat(
            [text[:, : t + 1], torch.tensor([[BOS, *HELD_OUT[5000 : 5000 + 299 - t]]])[:, 1:]],
            dim=1,
        )
        a, b = model(text), model(changed)
        assert torch.equal(a.boundaries[:, : t + 1], b.boundaries[:, : t + 1])
        torch.testing.assert_close(a.logits[:, : t + 1], b.logits[:, : t + 1], atol=1e-5, rtol=0)
        assert not torch.equal(a.boundaries, b.boundaries)  # the test has teeth


def test_bpe_boundaries_sit_at_token_starts():
    model = smoke_model("bpe")
    ids = torch.tensor([[BOS, *HELD_OUT[:400]]])
    assert model(ids).boundaries[0, 1:].tolist() == small_bpe().causal_starts(list(HELD_OUT[:400]))


def test_bpe_lm_charges_each_token_to_its_last_byte():
    model = smoke_model("bpe-lm").eval()
    data = HELD_OUT[:300]
    targets = torch.tensor([list(data), list(data[:200]) + [0] * 100])
    valid = torch.ones_like(targets, dtype=torch.bool)
    valid[1, 200:] = False
    inputs = torch.cat([torch.full((2, 1), BOS), targets[:, :-1]], dim=1)
    out = model(inputs, targets=targets, valid=valid)
    # the same total from a plain token-level cross-entropy
    ids, ends = small_bpe().encode(data)
    tokens = torch.tensor([ids])
    x = torch.cat([torch.tensor([[model.bos]]), tokens[:, :-1]], dim=1)
    positions = torch.arange(x.size(1))[None]
    h = rms_norm(model.blocks(model.embed(x), positions))
    expected = F.cross_entropy(h[0] @ model.embed.weight.T, tokens[0], reduction="sum")
    torch.testing.assert_close(out.nll[0].sum(), expected, rtol=1e-4, atol=1e-3)
    assert set(out.nll[0].nonzero()[:, 0].tolist()) <= {e - 1 for e in ends}
    assert (out.nll[1, 200:] == 0).all()
    # a token ending at byte e - 1 ends a chunk at input e
    assert out.boundaries[0, 1:].sum() == sum(e < len(data) for e in ends)


def test_bpe_lm_treats_bos_in_the_stream_as_its_own_token():
    model = smoke_model("bpe-lm").eval()
    targets = torch.tensor([[*b"to be", BOS, *b"or not"]])
    tokens, last_byte, real = model.tokenize(targets, torch.ones_like(targets, dtype=torch.bool))
    assert (
        model.bos in tokens[0].tolist()
        and last_byte[0].tolist()[tokens[0].tolist().index(model.bos)] == 5
    )
    assert math.isfinite(float(model(targets, targets=targets).nll.sum().detach()))
