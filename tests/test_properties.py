"""Property tests: the invariants hold for any mask, rewards, input and batch layout hypothesis finds."""

import math

import pytest
import torch
from conftest import smoke_model
from hypothesis import given, settings
from hypothesis import strategies as st

from rltok.boundaries import METHODS
from rltok.boundaries.estimator import discounted_returns
from rltok.evaluate import evaluate
from rltok.layers.chunking import chunk_ends, distribute, owning_chunk, select

FAST = settings(max_examples=40, deadline=None)


@st.composite
def masks(draw):
    """(B, L) boundary masks: only the forced BOS, every byte, or random at a random density."""
    B, L = draw(st.integers(1, 4)), draw(st.integers(1, 70))
    kind = draw(st.sampled_from(["forced only", "all", "random"]))
    if kind == "forced only":
        mask = torch.zeros(B, L, dtype=torch.long)
    elif kind == "all":
        mask = torch.ones(B, L, dtype=torch.long)
    else:
        g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
        mask = (torch.rand(B, L, generator=g) < draw(st.floats(0, 1))).long()
    mask[:, 0] = 1
    return mask


@FAST
@given(masks())
def test_downsample_upsample_invariants(mask):
    B, L = mask.shape
    d = 3
    x = torch.randn(B, L, d)
    ends, valid = chunk_ends(mask)
    y = select(x, ends)
    assert y.shape == (B, int(mask.sum(1).max()), d) and valid.sum() == mask.sum()
    y = y.masked_fill(~valid[..., None], math.nan)  # padding chunks: must never reach a real byte
    up = distribute(y, mask)
    assert up.shape == x.shape and torch.isfinite(up).all()
    owner = owning_chunk(mask)
    for b in range(B):
        real_ends = ends[b, valid[b]].tolist()
        assert real_ends == torch.nonzero(mask[b]).flatten().tolist()
        # chunk lengths (the last chunk may still be open) sum to the sequence length
        assert (
            sum(e - s for s, e in zip([-1, *real_ends], real_ends)) + (L - 1 - real_ends[-1]) == L
        )
        for t in range(L):
            j = int(owner[b, t])
            assert real_ends[j] <= t and (j + 1 == len(real_ends) or real_ends[j + 1] > t)
            assert torch.equal(up[b, t], x[b, real_ends[j]])


@st.composite
def rewards_and_padding(draw):
    B, L = draw(st.integers(1, 4)), draw(st.integers(1, 40))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    lengths = torch.tensor([draw(st.integers(0, L)) for _ in range(B)])
    valid = torch.arange(L) < lengths[:, None]
    return (
        torch.randn(B, L, generator=g),
        torch.randn(B, L, generator=g),
        valid,
        draw(st.floats(0, 1)),
    )


@FAST
@given(rewards_and_padding(), st.floats(-3, 3), st.floats(-3, 3))
def test_discounted_returns_are_linear_and_match_the_loop(data, a, b):
    r1, r2, valid, gamma = data
    g1, g2 = discounted_returns(r1, gamma, valid), discounted_returns(r2, gamma, valid)
    torch.testing.assert_close(
        discounted_returns(a * r1 + b * r2, gamma, valid), a * g1 + b * g2, atol=1e-4, rtol=1e-4
    )
    for row in range(r1.size(0)):
        for t in range(r1.size(1)):
            expected = sum(
                gamma ** (k - t) * float(r1[row, k]) for k in range(t, r1.size(1)) if valid[row, k]
            )
            assert abs(float(g1[row, t]) - expected) < 1e-4


CAUSAL_METHODS = [("rl", {"policy.window": 1}), ("rl", {"policy.window": 8})] + [
    (m, {}) for m in METHODS if m != "rl"
]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(CAUSAL_METHODS), st.integers(0, 2**31), st.integers(1, 120), st.booleans())
def test_causal_for_random_inputs_masks_and_methods(method_fields, seed, L, forced):
    method, fields = method_fields
    g = torch.Generator().manual_seed(seed)
    t = int(torch.randint(0, L, (1,), generator=g))
    ids = torch.randint(0, 256, (2, L), generator=g)
    changed = ids.clone()
    changed[:, t + 1 :] = torch.randint(0, 256, (2, L - t - 1), generator=g)
    noise = torch.rand(2, L, generator=g)
    torch.manual_seed(seed)
    model = smoke_model(method, fields)
    if forced or model.boundary_method.reads_gold:  # the gold oracle only ever runs forced
        mask = (torch.rand(2, L, generator=g) < 0.3).long()
        other = mask.clone()
        other[:, t + 1 :] = 1 - other[:, t + 1 :]
        a, b = model(ids, boundaries=mask), model(changed, boundaries=other)
    else:
        a, b = model(ids, noise=noise), model(changed, noise=noise)
        assert torch.equal(a.boundaries[:, : t + 1], b.boundaries[:, : t + 1])
    torch.testing.assert_close(a.logits[:, : t + 1], b.logits[:, : t + 1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("method_fields", CAUSAL_METHODS, ids=lambda m: f"{m[0]}{m[1] or ''}")
@pytest.mark.parametrize("L", [1, 2])
def test_every_method_runs_on_sequences_of_one_and_two_bytes(method_fields, L):
    # hypothesis found hnet dropping BOS on a 1-byte sequence; pin every method's edge case
    model = smoke_model(*method_fields)
    # the gold oracle is handed its segmentation (here: every byte starts a word)
    forced = torch.ones(2, L, dtype=torch.long) if model.boundary_method.reads_gold else None
    out = model(torch.randint(0, 256, (2, L)), boundaries=forced)
    assert out.logits.shape[:2] == (2, L) and torch.isfinite(out.logits).all()
    assert out.boundaries[:, 0].eq(1).all()


@settings(max_examples=8, deadline=None)
@given(
    st.lists(st.integers(1, 300), min_size=2, max_size=6), st.integers(0, 2**31), st.integers(1, 5)
)
def test_per_document_bpb_does_not_depend_on_the_batch(lengths, seed, batch_size):
    g = torch.Generator().manual_seed(seed)
    docs = [bytes(torch.randint(32, 127, (n,), generator=g).tolist()) for n in lengths]
    model = smoke_model("rl")
    together = evaluate(model, docs, 64, batch_size, precision="fp32", per_document=True)
    for doc, bpb in zip(docs, together["bpb_per_document"]):
        alone = evaluate(model, [doc], 64, 1, precision="fp32", per_document=True)
        assert bpb == pytest.approx(alone["bpb_per_document"][0], rel=1e-5)
