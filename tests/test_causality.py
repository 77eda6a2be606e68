"""The prediction of byte t+1 may depend only on bytes <= t and boundary decisions <= t."""

import pytest
import torch
from conftest import smoke_model

METHODS = [("rl", {"policy.window": 1}), ("rl", {"policy.window": 8}), ("uniform", {})]


def _perturb_after(ids: torch.Tensor, t: int) -> torch.Tensor:
    changed = ids.clone()
    changed[:, t + 1 :] = torch.randint(0, 256, changed[:, t + 1 :].shape)
    return changed


@pytest.mark.parametrize("method,fields", METHODS)
@pytest.mark.parametrize("t", [0, 17, 63, 64, 150])
def test_sampled_boundaries_are_causal(method, fields, t):
    model = smoke_model(method, fields)
    ids = torch.randint(0, 256, (3, 200))
    ids[:, 0] = 256
    changed = _perturb_after(ids, t)
    torch.manual_seed(1)
    a = model(ids)
    torch.manual_seed(1)
    b = model(changed)
    assert torch.equal(a.boundaries[:, : t + 1], b.boundaries[:, : t + 1])
    torch.testing.assert_close(a.logits[:, : t + 1], b.logits[:, : t + 1], atol=1e-5, rtol=0)
    torch.testing.assert_close(
        a.early_logits[:, : t + 1], b.early_logits[:, : t + 1], atol=1e-5, rtol=0
    )
    if method == "rl" and t < 150:  # the future did change something, so the test has teeth
        assert not torch.allclose(a.logits[:, t + 1 :], b.logits[:, t + 1 :])


@pytest.mark.parametrize("method,fields", METHODS)
@pytest.mark.parametrize("t", [5, 90])
def test_forced_boundaries_are_causal(method, fields, t):
    model = smoke_model(method, fields)
    ids = torch.randint(0, 256, (2, 160))
    ids[:, 0] = 256
    mask = (torch.rand(2, 160) < 0.3).long()
    changed_mask = mask.clone()
    changed_mask[:, t + 1 :] = (torch.rand(2, 160 - t - 1) < 0.5).long()
    a = model(ids, boundaries=mask)
    b = model(_perturb_after(ids, t), boundaries=changed_mask)
    torch.testing.assert_close(a.logits[:, : t + 1], b.logits[:, : t + 1], atol=1e-5, rtol=0)
    if method == "rl":
        torch.testing.assert_close(
            a.decision.probs[:, : t + 1], b.decision.probs[:, : t + 1], atol=1e-6, rtol=0
        )


def test_forced_boundaries_are_used():
    model = smoke_model("rl")
    ids = torch.randint(0, 256, (2, 64))
    mask = (torch.rand(2, 64) < 0.3).long()
    out = model(ids, boundaries=mask)
    mask[:, 0] = 1
    assert torch.equal(out.boundaries, mask)
    # a different segmentation changes the prediction
    other = model(ids, boundaries=1 - mask)
    assert not torch.allclose(out.logits[:, 1:], other.logits[:, 1:])


@pytest.mark.parametrize("window", [1, 8])
def test_rollouts_are_extra_segmentations_of_the_same_texts(window):
    """The group estimator's rollouts share the encoder but are otherwise plain forward passes: the
    lead rows equal a forward without rollouts, each rollout equals a forward of its text with its
    noise, so causality carries over from the tests above."""
    model = smoke_model("rl", {"policy.window": window})
    ids = torch.randint(0, 256, (3, 120))
    ids[:, 0] = 256
    rollouts = torch.tensor([0, 0, 0, 2, 2, 2])
    noise = torch.rand(9, 120)
    out = model(ids, noise=noise, rollouts=rollouts)
    lead = model(ids, noise=noise[:3])
    again = model(ids[rollouts], noise=noise[3:])
    torch.testing.assert_close(out.logits, lead.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.rollout_logits, again.logits, atol=1e-5, rtol=0)
    assert torch.equal(out.decision.boundaries, torch.cat([lead.boundaries, again.boundaries]))
    assert not out.rollout_logits.requires_grad  # rollouts only score rewards
    # independent noise
    assert not torch.equal(out.decision.boundaries[3], out.decision.boundaries[4])


def test_with_group_lm_the_language_model_learns_every_segmentation_each_text_as_one_row():
    """`learn_rollouts` keeps the rollouts' gradient, and the language-model term is then the mean over
    texts of the mean over each text's segmentations: a text segmented K times weighs as much as one
    segmented once."""
    from rltok.config import LossWeights
    from rltok.objective import next_byte_nll, run_model, training_loss

    model = smoke_model("rl").train()
    ids = torch.randint(0, 256, (3, 60))
    ids[:, 0] = 256
    inputs, targets = ids[:, :-1], ids[:, 1:]
    valid = torch.ones_like(targets, dtype=torch.bool)
    rollouts, noise = torch.tensor([0, 0, 2]), torch.rand(6, 59)
    out, nll = run_model(
        model, inputs, targets, valid, noise=noise, rollouts=rollouts, learn_rollouts=True
    )
    assert out.rollout_logits.requires_grad
    _, parts = training_loss(model, out, nll, targets, valid, LossWeights())
    extra = next_byte_nll(out.rollout_logits, targets[rollouts], valid[rollouts]).mean(1)
    per_text = torch.stack(
        [(nll[0].mean() + extra[0] + extra[1]) / 3, nll[1].mean(), (nll[2].mean() + extra[2]) / 2]
    )
    torch.testing.assert_close(parts["loss_lm"], per_text.mean(), atol=1e-5, rtol=0)
    without, _ = run_model(model, inputs, targets, valid, noise=noise, rollouts=rollouts)
    assert not without.rollout_logits.requires_grad  # by default rollouts only score rewards


@pytest.mark.parametrize("method,fields", [("uniform", {}), ("hnet", {}), ("nawrot", {})])
def test_the_decoder_reads_only_what_the_main_network_adds(method, fields):
    """With a main network that adds nothing (its output projections at zero), every segmentation
    predicts alike: the decoder reads the main network's own contribution, not the chunk vector it
    started from. When it read a norm of the whole residual stream, each byte also received a
    projection of its chunk's last byte, a stale copy that trained models learned to ignore along with
    the main network (the tiny preset scored the same under every segmentation, BOS alone included)."""
    model = smoke_model(method, fields).eval()
    with torch.no_grad():
        for block in model.main.blocks:
            block.attn.proj.weight.zero_()
            block.mlp.down.weight.zero_()
    ids = torch.randint(0, 256, (2, 120))
    ids[:, 0] = 256
    bos = torch.zeros_like(ids)
    bos[:, 0] = 1
    every = torch.ones_like(ids)
    with torch.no_grad():
        alone, dense = model(ids, boundaries=bos).logits, model(ids, boundaries=every).logits
        torch.testing.assert_close(alone, dense, atol=1e-5, rtol=0)
        for block in model.main.blocks:  # and a main network that adds something does matter
            torch.nn.init.normal_(block.mlp.down.weight, std=0.02)
        assert not torch.allclose(
            model(ids, boundaries=bos).logits, model(ids, boundaries=every).logits
        )
