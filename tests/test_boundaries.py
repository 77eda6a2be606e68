"""Boundary methods and the chunking they drive."""

import pytest
import torch
from conftest import smoke_model

import rltok
from rltok.layers.chunking import chunk_ends, distribute, owning_chunk, select


@pytest.mark.parametrize("window", [1, 3, 8])
def test_sampled_decisions_follow_the_reported_probabilities(window):
    """The parallel logits for the sampled decisions are the ones the sequential sampler used."""
    model = smoke_model("rl", {"policy.window": window})
    ids = torch.randint(0, 256, (4, 100))
    noise = torch.rand(4, 100)
    out = model(ids, noise=noise)
    expected = (noise < out.decision.probs).long()
    expected[:, 0] = 1
    assert torch.equal(out.boundaries, expected)


def test_greedy_noise_gives_threshold_decisions():
    model = smoke_model("rl")
    out = model(torch.randint(0, 256, (2, 80)), noise=torch.full((2, 80), 0.5))
    assert torch.equal(out.boundaries[:, 1:], (out.decision.probs[:, 1:] > 0.5).long())


def test_untrained_policy_starts_at_target_rate():
    from rltok.config import preset
    from rltok.pretrained import build_model

    cfg = preset("smoke")
    cfg.boundaries.target_rate = 0.3
    ids = torch.randint(0, 256, (8, 128))
    # before its first training batch the surprisal prior has no entropy statistics and adds nothing
    out = build_model(cfg).eval()(ids)
    # softcap
    torch.testing.assert_close(out.decision.probs, torch.full((8, 128), 0.3), atol=0.005, rtol=0)
    cfg.boundaries.prior.weight = 0.0  # the paper's policy: at the target rate in training too
    out = build_model(cfg)(ids)
    torch.testing.assert_close(out.decision.probs, torch.full((8, 128), 0.3), atol=0.005, rtol=0)
    assert abs(out.boundaries[:, 1:].float().mean() - 0.3) < 0.05


def test_uniform_draws_exactly_round_rate_times_length():
    model = smoke_model("uniform")
    out = model(torch.randint(0, 256, (6, 128)))
    assert torch.all(out.boundaries.sum(dim=1) == round(0.2 * 128))
    assert torch.all(out.boundaries[:, 0] == 1)


@pytest.mark.parametrize("method,ends_on", [("whitespace", b" ,\n"), ("word-start", b"Tbon")])
def test_word_edge_rules_end_chunks_on_either_side_of_a_word(method, ends_on):
    """SpaceByte ends a chunk on the first space-like byte after a word, word-start on the word's first
    byte (the document's first byte follows BOS, which counts as space-like)."""
    text = b"To be,  or\nnot"
    out = smoke_model(method)(rltok.encode(text)[None])
    assert out.boundaries[0, 0] == 1
    assert bytes(text[t] for t in out.boundaries[0, 1:].nonzero().flatten().tolist()) == ends_on


def test_select_and_distribute_map_each_byte_to_last_chunk_ending_at_or_before_it():
    boundaries = torch.tensor([[1, 0, 0, 1, 0, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
    ends, valid = chunk_ends(boundaries)
    assert ends.shape == (2, 8)
    assert ends[0, :3].tolist() == [0, 3, 5] and valid[0].tolist() == [True] * 3 + [False] * 5
    x = torch.arange(16, dtype=torch.float32).view(2, 8, 1)
    chunks = select(x, ends)
    assert chunks[0, :3, 0].tolist() == [0.0, 3.0, 5.0]
    back = distribute(chunks, boundaries)
    assert back[0, :, 0].tolist() == [0, 0, 0, 3, 3, 5, 5, 5]
    assert back[1, :, 0].tolist() == x[1, :, 0].tolist()
    assert owning_chunk(boundaries)[0].tolist() == [0, 0, 0, 1, 1, 2, 2, 2]


def test_chunk_indices_exact_beyond_bf16_range():
    """Counting in bf16 would round above 256; indices must stay exact for long sequences."""
    boundaries = torch.ones(1, 5000, dtype=torch.long)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ends, _ = chunk_ends(boundaries)
        index = owning_chunk(boundaries)
    assert ends[0].tolist() == list(range(5000))
    assert index[0].tolist() == list(range(5000))


def test_packed_main_network_equals_padded():
    """Skipping padded chunk rows in the projections changes nothing for the real rows."""
    from rltok.layers.blocks import Stack
    from rltok.layers.packing import Packing

    stack = Stack(2, 32, 2, 4, None, 10000.0)
    x = torch.randn(3, 10, 32)
    positions = torch.arange(10).expand(3, 10) * 3
    valid = torch.arange(10) < torch.tensor([[10], [4], [7]])
    packed = stack(x, positions, Packing.of(valid))
    padded = stack(x, positions)
    torch.testing.assert_close(packed[: int(valid.sum())], padded[valid], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rate", [0.01, 0.99])
def test_policy_stays_finite_at_extreme_rates(rate):
    """Huge raw scores, forced positions and training steps at rates 0.01 and 0.99 give finite numbers."""
    from rltok.config import preset
    from rltok.data import TrainStream, embedded_corpus
    from rltok.step import make_optimizer, train_step

    model = smoke_model("rl", {"target_rate": rate})
    torch.nn.init.normal_(model.boundary.head.weight, std=1e4)
    ids = torch.randint(0, 256, (2, 128))
    for forced in (
        None,
        torch.ones(2, 128, dtype=torch.long),
        torch.zeros(2, 128, dtype=torch.long),
    ):
        decision = model(ids, boundaries=forced).decision
        assert torch.isfinite(decision.logits).all() and decision.logits.abs().max() <= 6.0
        assert ((decision.probs >= 0) & (decision.probs <= 1)).all()

    cfg = preset("smoke")
    cfg.boundaries.target_rate = rate
    model = smoke_model("rl", {"target_rate": rate}).train()
    optimizer = make_optimizer(model, cfg)
    stream = TrainStream(embedded_corpus().train, 128, 4, seed=0)
    for _ in range(5):
        loss, parts, grad_norm, culprit = train_step(model, optimizer, *stream.next_batch(), cfg)
        assert culprit is None and torch.isfinite(loss) and torch.isfinite(grad_norm)


def test_entropy_rule_moves_its_threshold_only_when_the_step_ends():
    """The rule decides with the previous step's threshold; a training batch reports its own (the entropy
    quantile at 1 - rate), the trainer commits it after the step, and evaluation leaves it alone."""
    from rltok.boundaries.rules import EntropyBoundaries
    from rltok.config import BoundaryConfig

    rule = EntropyBoundaries(8, BoundaryConfig(method="entropy", target_rate=0.25))
    torch.manual_seed(0)
    early = torch.randn(2, 64, 257) * torch.linspace(0.0, 8.0, 64)[None, :, None]
    x, ids = torch.randn(2, 64, 8), torch.zeros(2, 64, dtype=torch.long)
    logp = early.log_softmax(-1)
    entropy = -(logp.exp() * logp).sum(-1)

    decision = rule.train()(x, ids, early)
    assert decision.boundaries.all(), "before the first step every byte ends a chunk"
    assert rule.threshold.isnan(), "a forward pass alone must not move the threshold"
    _, stats = rule.losses(
        decision, *(torch.zeros(2, 64),) * 2, torch.ones(2, 64, dtype=torch.bool)
    )
    torch.testing.assert_close(stats["entropy_threshold"], torch.quantile(entropy.flatten(), 0.75))
    rule.end_step(stats)

    decided = rule.eval()(x, ids, early)
    assert decided.stats == {}
    assert torch.equal(
        decided.boundaries[:, 1:], (entropy > stats["entropy_threshold"]).long()[:, 1:]
    )
    assert abs(decided.boundaries[:, 1:].float().mean().item() - 0.25) < 0.02
