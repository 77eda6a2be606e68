"""The score-function estimator: returns, centering, and unbiasedness on an enumerable problem."""

import dataclasses
import itertools

import pytest
import torch
from conftest import boundary_config

from rltok.boundaries.estimator import (
    batch_relative,
    discounted_returns,
    leave_one_out,
    policy_loss,
    rate_loss,
    rate_neutral,
)


def _naive_returns(rewards, gamma, valid):
    B, L = rewards.shape
    out = torch.zeros(B, L, dtype=torch.float64)
    for b in range(B):
        for t in range(L):
            for k in range(t, L):
                if valid[b, k]:
                    out[b, t] += gamma ** (k - t) * float(rewards[b, k])
    return out


@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.99, 1.0])
def test_discounted_returns_match_double_loop(gamma):
    rewards = torch.randn(4, 37)
    valid = torch.ones(4, 37, dtype=torch.bool)
    valid[1, 30:] = False
    valid[3, 5:] = False
    got = discounted_returns(rewards, gamma, valid)
    want = _naive_returns(rewards, gamma, valid)
    torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-4)
    assert got.dtype == torch.float32


@pytest.mark.parametrize("length", [63, 64, 65, 300, 1000])
@pytest.mark.parametrize("gamma", [0.0, 0.9, 0.99, 1.0])
def test_blocked_discounted_returns_equal_the_full_decay_matrix(length, gamma):
    """Blocks of 64 positions joined through each block's first return give what an (L, L) matrix does."""
    rewards, valid = torch.randn(3, length), torch.rand(3, length) > 0.1
    lag = torch.arange(length)[:, None] - torch.arange(length)[None, :]
    decay = torch.tensor(gamma).pow(lag.clamp(min=0).float()).masked_fill(lag < 0, 0.0)
    want = (rewards * valid) @ decay
    torch.testing.assert_close(
        discounted_returns(rewards, gamma, valid), want, atol=1e-4, rtol=1e-4
    )


def test_discounted_returns_under_bf16_autocast_stay_fp32():
    rewards = torch.randn(2, 300)
    valid = torch.ones(2, 300, dtype=torch.bool)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = discounted_returns(rewards, 0.99, valid)
    torch.testing.assert_close(
        got.double(), _naive_returns(rewards, 0.99, valid), atol=1e-4, rtol=1e-4
    )


def test_batch_relative_centering_ignores_padding():
    rewards = torch.randn(5, 20) + 3.0
    valid = torch.ones(5, 20, dtype=torch.bool)
    valid[0, 12:] = False
    valid[2, 4:] = False
    valid[1:, 19] = False  # only one sequence is valid at the last index
    rewards[~valid] = 1e6  # garbage in padding must not leak
    centered = batch_relative(rewards * valid, valid)
    assert torch.all(centered[~valid] == 0)
    per_index_sum = (centered * valid).sum(dim=0)
    torch.testing.assert_close(per_index_sum, torch.zeros(20), atol=1e-4, rtol=0)
    # at an index where several sequences are valid, the mean over exactly those is removed
    t = 15
    rows = valid[:, t]
    torch.testing.assert_close(centered[rows, t], rewards[rows, t] - rewards[rows, t].mean())


def test_score_function_estimate_is_unbiased():
    """Average of the estimator (gamma = 1, no centering) equals the exact gradient of E[reward]."""
    torch.manual_seed(0)
    T = 4
    theta = torch.randn(T, dtype=torch.float64)
    # r_k depends on the decisions a_0..a_k only (a causal reward), through a random table
    table = [torch.randn(2 ** (k + 1), dtype=torch.float64) for k in range(T)]

    def rewards_of(actions):  # actions (N, T) in {0, 1}
        cols = []
        for k in range(T):
            code = sum(actions[:, j].long() << j for j in range(k + 1))
            cols.append(table[k][code])
        return torch.stack(cols, dim=1)

    # exact gradient of J = sum_a pi(a) sum_k r_k(a) by enumeration
    theta_exact = theta.clone().requires_grad_(True)
    all_actions = torch.tensor(list(itertools.product([0, 1], repeat=T)), dtype=torch.float64)
    p = torch.sigmoid(theta_exact)
    prob = (p**all_actions * (1 - p) ** (1 - all_actions)).prod(dim=1)
    J = (prob * rewards_of(all_actions).sum(dim=1)).sum()
    (exact,) = torch.autograd.grad(J, theta_exact)

    # the library's surrogate loss over many independent samples
    N = 200_000
    actions = (torch.rand(N, T, dtype=torch.float64) < torch.sigmoid(theta)).long()
    returns = discounted_returns(
        rewards_of(actions).float(), 1.0, torch.ones(N, T, dtype=torch.bool)
    )
    logits = theta.float().expand(N, T).clone().requires_grad_(True)
    loss = policy_loss(logits, actions, returns, torch.ones(N, T, dtype=torch.bool))
    loss.backward()
    per_sample = -logits.grad.double() * N * T  # the loss is a mean over N*T positions, and is -J
    mean, stderr = per_sample.mean(dim=0), per_sample.std(dim=0) / N**0.5
    assert torch.all((mean - exact).abs() < 4 * stderr), (mean, exact, stderr)
    # the check is tight enough to mean something
    assert torch.all(stderr < 0.05 * exact.abs().max())


def test_rate_loss_pushes_towards_target():
    logits = torch.zeros(3, 10, requires_grad=True)  # p = 0.5, above a target of 0.2
    rate_loss(logits, torch.ones(3, 10, dtype=torch.bool), 0.2).backward()
    assert torch.all(logits.grad > 0)  # gradient descent lowers every logit
    logits = torch.full((3, 10), -3.0, requires_grad=True)  # p = 0.047, below target
    rate_loss(logits, torch.ones(3, 10, dtype=torch.bool), 0.2).backward()
    assert torch.all(logits.grad < 0)


def test_a_calibrated_rate_offset_reaches_the_target_without_a_rate_loss():
    """With `rate_control="calibrate"` no rate loss trains the head or the encoder (the paper's rate loss
    trains them along the mean encoder state); one shared logit offset takes a Newton step per optimizer
    step and holds the rate, whatever the head says."""
    from rltok.boundaries.rl import RLPolicy
    from rltok.config import BoundaryConfig

    torch.manual_seed(0)
    x, ids, early = (
        torch.randn(4, 64, 8),
        torch.zeros(4, 64, dtype=torch.long),
        torch.randn(4, 64, 257),
    )
    valid, nll = torch.ones(4, 64, dtype=torch.bool), torch.rand(4, 64)
    policy = RLPolicy(
        8,
        boundary_config(
            {"prior.weight": 0.0, "policy.rate_control": "calibrate", "policy.softcap": 0.0}
        ),
    )
    torch.nn.init.normal_(policy.head.weight, mean=0.5)  # far above the target rate of 0.2
    rates = []
    for _ in range(6):
        decision = policy.train()(x, ids, early)
        terms, stats = policy.losses(decision, nll, nll * 0, valid)
        assert set(terms) == {"policy"}
        rates.append(stats["mean_prob"].item())
        policy.end_step(stats)
    assert rates[0] > 0.3 and abs(rates[-1] - 0.2) < 0.001, rates
    # saved with the weights: a resumed run decides alike
    assert "rate.rate_offset" in policy.state_dict()
    # the paper's form adds no state
    assert not any("rate" in key for key in RLPolicy(8, BoundaryConfig()).state_dict())


def test_the_read_entropy_cue_is_the_next_byte_entropy_one_byte_later():
    """`prior_cue="read-entropy"` scores byte t by how uncertain the prediction of byte t was (made at
    t - 1): the boundary lands on a hard byte instead of before it."""
    from rltok.boundaries.base import next_byte_entropy
    from rltok.boundaries.rl import RLPolicy

    early, ids = torch.randn(2, 12, 257) * 3, torch.randint(0, 256, (2, 12))
    cue = RLPolicy(8, boundary_config({"prior.cue": "read-entropy"})).prior.cue(early, ids)
    torch.testing.assert_close(cue[:, 1:], next_byte_entropy(early)[:, :-1])
    assert torch.all(cue[:, 0] == 0)


def test_the_entropy_drop_cue_is_the_read_entropy_less_the_next_bytes():
    """`prior_cue="entropy-drop"` scores byte t by how much less uncertain the prediction after it is
    than the prediction of it: high where a hard byte leaves an easy one."""
    from rltok.boundaries.base import next_byte_entropy
    from rltok.boundaries.rl import RLPolicy

    early, ids = torch.randn(2, 12, 257) * 3, torch.randint(0, 256, (2, 12))
    entropy = next_byte_entropy(early)
    cue = RLPolicy(8, boundary_config({"prior.cue": "entropy-drop"})).prior.cue(early, ids)
    torch.testing.assert_close(cue[:, 1:], entropy[:, :-1] - entropy[:, 1:])
    torch.testing.assert_close(cue[:, 0], -entropy[:, 0])  # nothing read before BOS


def test_leave_one_out_has_zero_mean_in_every_group_and_ignores_padding():
    # texts 0 and 1 segmented 4 and 3 times, text 2 once
    groups = torch.tensor([0, 0, 0, 1, 1, 2, 0, 1])
    rewards = torch.randn(8, 30) + 5.0
    valid = torch.ones(8, 30, dtype=torch.bool)
    valid[1, 20:] = False  # one row of text 0 is shorter
    valid[4, 10:] = False
    rewards[~valid] = 1e6  # garbage in padding must not leak
    adv, signal = leave_one_out(rewards * valid, groups, valid)
    assert torch.all(adv[~valid] == 0) and not signal[~valid].any()
    assert not signal[5].any() and torch.all(adv[5] == 0)  # a text segmented once carries no signal
    for g in (0, 1):
        rows = groups == g
        torch.testing.assert_close(
            (adv[rows] * valid[rows]).sum(dim=0), torch.zeros(30), atol=1e-4, rtol=0
        )
    # each row against the mean of the *other* valid rows of its text
    t = 25  # row 1 is padding here, so text 0 has rows 0, 2, 6
    torch.testing.assert_close(adv[0, t], rewards[0, t] - (rewards[2, t] + rewards[6, t]) / 2)
    # row 4 is padding at 15
    torch.testing.assert_close(adv[3, 15], rewards[3, 15] - rewards[7, 15])
    # a row whose text has no other valid row at an index carries no signal there
    lone = torch.tensor([0, 0])
    short = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    _, lone_signal = leave_one_out(torch.randn(2, 5) * short, lone, short)
    assert lone_signal[0, :3].all() and not lone_signal[0, 3:].any()


def test_a_rate_neutral_price_keeps_the_ranking_of_positions_and_removes_the_push_on_the_rate():
    """Every chunk end lowers the loss, those at even positions more: the plain estimator raises every
    logit; with the price its step leaves the rate unchanged to first order and still moves the even
    positions up and the odd ones down."""
    torch.manual_seed(0)
    texts, K, T = 512, 4, 16
    groups = torch.arange(texts).repeat_interleave(K)
    probs = torch.full((texts * K, T), 0.3)
    actions = (torch.rand(texts * K, T) < probs).long()
    even = (torch.arange(T) % 2 == 0).float()
    rewards = actions * (1.0 + 0.5 * even)
    valid = torch.ones(texts * K, T, dtype=torch.bool)
    adv, signal = leave_one_out(rewards, groups, valid)
    price = leave_one_out(actions.float(), groups, valid)[0]
    returns = discounted_returns(adv, 0.5, valid)
    priced, lam = rate_neutral(
        returns, discounted_returns(price, 0.5, valid), actions, probs, signal
    )
    assert 1.0 < lam < 1.5  # between the two positions' worth of a chunk end

    def step(rets):  # the logits' move under one gradient step, and the first-order change in rate
        logits = torch.logit(probs).requires_grad_(True)
        policy_loss(logits, actions, rets, signal).backward()
        move = -logits.grad
        return move, (probs * (1 - probs) * move).sum()

    plain_move, plain_rate = step(returns)
    move, rate = step(priced)
    assert plain_rate > 0 and (plain_move.mean(0) > 0).all()
    assert abs(rate) < 1e-6 * plain_rate
    assert (move.mean(0)[::2] > 0).all() and (move.mean(0)[1::2] < 0).all()


def _enumerable_problem(T):
    theta = torch.randn(T, dtype=torch.float64)
    table = [torch.randn(2 ** (k + 1), dtype=torch.float64) for k in range(T)]

    def rewards_of(actions):  # r_k depends on a_0..a_k only, through a random table
        return torch.stack(
            [table[k][sum(actions[:, j].long() << j for j in range(k + 1))] for k in range(T)],
            dim=1,
        )

    theta_exact = theta.clone().requires_grad_(True)
    all_actions = torch.tensor(list(itertools.product([0, 1], repeat=T)), dtype=torch.float64)
    p = torch.sigmoid(theta_exact)
    prob = (p**all_actions * (1 - p) ** (1 - all_actions)).prod(dim=1)
    (exact,) = torch.autograd.grad((prob * rewards_of(all_actions).sum(dim=1)).sum(), theta_exact)
    return theta, rewards_of, exact


def _group_estimates(theta, rewards_of, n_texts, K, offset_scale=0.0):
    """Per-text gradient estimates of the library's surrogate with leave-one-out advantages: each text
    is segmented K times; every text adds its own offset to all its rewards (text noise)."""
    T = len(theta)
    groups = torch.arange(n_texts).repeat_interleave(K)
    actions = (torch.rand(n_texts * K, T, dtype=torch.float64) < torch.sigmoid(theta)).long()
    offsets = offset_scale * torch.randn(n_texts, 1, dtype=torch.float64)[groups]
    valid = torch.ones(n_texts * K, T, dtype=torch.bool)
    adv, signal = leave_one_out((rewards_of(actions) + offsets).float(), groups, valid)
    returns = discounted_returns(adv, 1.0, valid)
    logits = theta.float().expand(n_texts * K, T).clone().requires_grad_(True)
    policy_loss(logits, actions, returns, signal).backward()
    per_row = -logits.grad.double() * n_texts * K * T  # the loss is a mean over every position
    return per_row.view(n_texts, K, T).mean(dim=1)


@pytest.mark.parametrize("K", [2, 4])
def test_group_estimator_is_unbiased(K):
    """Leave-one-out centring removes no expected gradient: the mean estimate equals the exact one."""
    torch.manual_seed(0)
    theta, rewards_of, exact = _enumerable_problem(4)
    estimates = _group_estimates(theta, rewards_of, 100_000, K)
    mean, stderr = estimates.mean(dim=0), estimates.std(dim=0) / len(estimates) ** 0.5
    assert torch.all((mean - exact).abs() < 4 * stderr), (mean, exact, stderr)
    assert torch.all(stderr < 0.05 * exact.abs().max())


def test_group_estimator_cancels_the_noise_of_the_text():
    """A reward offset shared by every segmentation of a text (how hard the text is) leaves the
    group estimate unchanged, while it inflates the batch-relative (paper) estimate's variance."""
    torch.manual_seed(0)
    theta, rewards_of, _ = _enumerable_problem(4)
    torch.manual_seed(1)
    plain = _group_estimates(theta, rewards_of, 4096, 4)
    torch.manual_seed(1)
    noisy = _group_estimates(theta, rewards_of, 4096, 4, offset_scale=10.0)
    torch.testing.assert_close(noisy, plain, atol=1e-3, rtol=1e-3)

    T, N = 4, 16384
    actions = (torch.rand(N, T, dtype=torch.float64) < torch.sigmoid(theta)).long()
    rewards = rewards_of(actions) + 10.0 * torch.randn(N, 1, dtype=torch.float64)
    valid = torch.ones(N, T, dtype=torch.bool)
    returns = discounted_returns(batch_relative(rewards.float(), valid), 1.0, valid)
    logits = theta.float().expand(N, T).clone().requires_grad_(True)
    policy_loss(logits, actions, returns, valid).backward()
    paper = -logits.grad.double() * N * T
    assert torch.all(paper.var(dim=0) > 10 * plain.var(dim=0) * 4)  # per text segmented 4 times


def test_surprisal_prior_raises_the_boundary_probability_where_the_next_byte_is_uncertain():
    """With the head at zero the logit is the target rate's plus beta x the entropy standardised with
    the previous step's statistics: the policy reports them from each training batch, the trainer hands
    them back after the step (`end_step`), they are saved with the weights, and before the first step
    the prior is 0 (chance); beta = 0 adds no state, so paper runs load as before."""
    from rltok.boundaries.rl import RLPolicy

    assert not RLPolicy(8, boundary_config({"prior.weight": 0.0})).state_dict().keys() - {
        "head.weight"
    }
    policy = RLPolicy(
        8, boundary_config({"prior.weight": 1.0, "target_rate": 0.2, "policy.softcap": 0.0})
    )
    torch.manual_seed(0)
    sharpness = torch.linspace(0.0, 8.0, 32)  # sharper next-byte logits: lower entropy
    early = torch.randn(2, 32, 257) * sharpness[None, :, None]
    x, ids = torch.randn(2, 32, 8), torch.zeros(2, 32, dtype=torch.long)
    logp = early.log_softmax(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    chance = torch.full((2, 32), 0.2)
    torch.testing.assert_close(policy.eval()(x, ids, early).probs, chance)

    decision = policy.train()(x, ids, early)
    torch.testing.assert_close(decision.probs, chance)  # no step has ended yet
    zeros, valid = torch.zeros(2, 32), torch.ones(2, 32, dtype=torch.bool)
    _, stats = policy.losses(decision, zeros, zeros, valid)
    torch.testing.assert_close(
        torch.stack([stats["early_entropy"], stats["early_entropy_std"]]),
        torch.stack([entropy.mean(), entropy.std()]),
    )
    policy.end_step(stats)

    probs = policy(x, ids, early).probs
    by_entropy = probs.gather(1, entropy.argsort(dim=1))
    assert torch.all(by_entropy.diff(dim=1) >= 0), "probability must rise with the entropy"
    expected = torch.sigmoid(
        torch.logit(torch.tensor(0.2)) + (entropy - entropy.mean()) / entropy.std()
    )
    torch.testing.assert_close(probs, expected)
    stats = policy.prior.entropy_stats.clone()
    # evaluation decides alike ...
    torch.testing.assert_close(policy.eval()(x, ids, early).probs, expected)
    torch.testing.assert_close(
        policy.prior.entropy_stats, stats
    )  # ... and leaves the statistics alone
    assert "prior.entropy_stats" in policy.state_dict()


def test_group_estimator_takes_no_score_function_step_between_its_rollouts():
    """With K > 1 the policy learns from leave-one-out advantages only: a batch without rollouts (the
    policy is confident) gives the policy loss no gradient, where K = 1 falls back on batch-relative
    centring; the rate loss acts either way."""
    from rltok.boundaries.rl import RLPolicy

    torch.manual_seed(0)
    x, ids, early = (
        torch.randn(4, 32, 8),
        torch.zeros(4, 32, dtype=torch.long),
        torch.randn(4, 32, 257),
    )
    nll, early_nll = torch.rand(4, 32) * 3, torch.rand(4, 32) * 3
    valid = torch.ones(4, 32, dtype=torch.bool)
    for K, groups, learns in [
        (1, None, True),
        (4, None, False),
        (4, torch.tensor([0, 0, 1, 1]), True),
    ]:
        policy = RLPolicy(8, boundary_config({"group.size": K, "prior.weight": 0.0}))
        policy.head.weight.data.normal_()  # away from the target rate, so the rate loss has a gradient
        decision = policy.train()(x, ids, early)
        terms, _ = policy.losses(decision, nll, early_nll, valid, groups)
        (policy_grad,) = torch.autograd.grad(terms["policy"], policy.head.weight, retain_graph=True)
        (rate_grad,) = torch.autograd.grad(terms["rate"], policy.head.weight)
        assert bool(policy_grad.abs().sum() > 0) == learns, (K, groups)
        assert rate_grad.abs().sum() > 0


def test_greedy_lm_segmentation_trains_the_language_model_on_the_mode_and_the_policy_on_rollouts():
    """--lm-segmentation greedy: the batch's rows end chunks exactly where p > 0.5 (the segmentation the
    language model learns from), the rollouts sample, and only the rollouts carry the score-function
    gradient, each centred on the other rollouts of its text: the mode's reward plays no part."""
    from rltok.config import preset
    from rltok.pretrained import build_model
    from rltok.step import make_optimizer, train_step

    cfg = preset("smoke")
    b = cfg.boundaries
    b.policy.lm_segmentation, b.group.size, b.group.texts, b.group.entropy = "greedy", 3, 0, 0.0
    b.prior.weight, b.prior.cue = 4.0, "read-entropy"
    torch.manual_seed(0)
    model = build_model(cfg)
    model.boundary.head.weight.data.normal_()  # a policy with an opinion, so the mode has chunks
    seen = []
    model.boundary.register_forward_hook(lambda module, args, out: seen.append(out))
    gen = torch.Generator().manual_seed(1)
    inputs = torch.randint(0, 256, (4, 64), generator=gen)
    train_step(model, make_optimizer(model, cfg), inputs, torch.roll(inputs, -1, 1), cfg)
    decision = seen[0]
    B = len(inputs)
    assert len(decision.boundaries) == 3 * B  # every text twice more
    mode = (decision.probs[:B, 1:] > 0.5).long()
    assert torch.equal(decision.boundaries[:B, 1:], mode)
    assert mode.sum() > 0
    assert not torch.equal(decision.boundaries[B:, 1:], mode)  # the rollouts sample

    logits = decision.logits.detach().requires_grad_()
    nll, early_nll = torch.rand(3 * B, 64) * 3, torch.rand(3 * B, 64) * 3
    valid = torch.ones(3 * B, 64, dtype=torch.bool)
    groups = torch.cat([torch.arange(B), torch.arange(B).repeat_interleave(2)])

    def policy_gradient(nll: torch.Tensor) -> torch.Tensor:
        terms, _ = model.boundary.losses(
            dataclasses.replace(decision, logits=logits), nll, early_nll, valid, groups
        )
        return torch.autograd.grad(terms["policy"], logits)[0]

    grad = policy_gradient(nll)
    assert grad[:B].abs().sum() == 0  # the mode is no sample of the policy
    assert grad[B:].abs().sum() > 0
    better_mode = torch.cat([nll[:B] - 1.0, nll[B:]])
    assert torch.equal(policy_gradient(better_mode), grad)  # nor part of any rollout's baseline


@pytest.mark.parametrize("group_size", [1, 4])
def test_the_rate_neutral_policy_loss_has_no_gradient_along_the_rate(group_size):
    """On a real policy's decision, with a reward that pays for every chunk end: the policy loss of
    --rate-neutral moves the logits with sum p (1 - p) dl = 0 (the rate holds to first order), the plain
    one raises the rate; the price is logged."""
    from rltok.config import preset
    from rltok.pretrained import build_model

    cfg = preset("smoke")
    cfg.boundaries.group.size, cfg.boundaries.group.entropy = group_size, 0.0
    torch.manual_seed(0)
    model = build_model(cfg)
    model.boundary.head.weight.data.normal_(std=0.3)
    ids = torch.randint(0, 256, (4, 64))
    # each text K - 1 more times, its rows named by their text
    rollouts = torch.arange(4).repeat_interleave(group_size - 1) if group_size > 1 else None
    groups = None if rollouts is None else torch.cat([torch.arange(4), rollouts])
    decision = model(ids, rollouts=rollouts).decision
    rows = len(decision.boundaries)
    assert rows == 4 * group_size
    nll = torch.rand(rows, 64) * 3 - 0.5 * decision.boundaries  # a chunk end lowers the loss
    valid = torch.ones(rows, 64, dtype=torch.bool)
    probs = decision.probs

    def rate_move(neutral: bool) -> tuple[float, dict]:
        model.boundary.estimator.rate_neutral = neutral
        logits = decision.logits.detach().requires_grad_()
        terms, stats = model.boundary.losses(
            dataclasses.replace(decision, logits=logits), nll, torch.rand(rows, 64), valid, groups
        )
        (grad,) = torch.autograd.grad(terms["policy"], logits)
        return float((probs * (1 - probs) * -grad).sum()), stats

    plain, stats = rate_move(False)
    neutral, neutral_stats = rate_move(True)
    assert plain > 0 and "boundary_price" not in stats
    assert abs(neutral) < 1e-5 * plain
    assert float(neutral_stats["boundary_price"]) > 0  # a chunk end is worth something


def test_a_policy_that_reads_bytes_cuts_the_same_bytes_alike_wherever_they_occur():
    """--policy-context N: the logit at a byte is a function of the last N bytes alone, so a repeated
    byte string gets the same logits in any context; with the encoder's state it does not."""
    from conftest import smoke_model

    text = list(b"the cat sat on the mat; a bat ate the hat")
    ids = torch.tensor([[256, *text]])
    logits = {n: smoke_model("rl", {"policy.context": n})(ids).decision.logits[0] for n in (0, 3)}
    at = [i + 1 for i in range(len(text) - 2) if text[i : i + 3] == list(b"the")]
    assert len(at) == 3
    last = [t + 2 for t in at]  # the decision at each "e" reads exactly "the"
    assert torch.allclose(logits[3][last], logits[3][last[0]].expand(3))
    assert not torch.allclose(logits[0][last], logits[0][last[0]].expand(3))


def test_a_teaching_prior_leaves_the_logits_to_the_head_and_trains_it_towards_its_top_share():
    """--prior-role teach: the prior adds nothing to the logits; its chunk ends are the batch's top
    --target-rate share of the cue; the teach loss moves the head's logits towards them."""
    from conftest import smoke_model

    from rltok.boundaries.estimator import teacher_ends

    cue = torch.arange(100.0).view(2, 50)
    decided = torch.ones(2, 50, dtype=torch.bool)
    decided[:, 0] = False
    ends = teacher_ends(cue, decided, 0.2)
    assert ends.sum() == 20 and ends[1, 30:].all() and not ends[0].any()

    model = smoke_model(
        "rl", {"policy.context": 3, "prior.weight": 4.0, "prior.role": "teach"}
    ).train()
    model.boundary.prior.entropy_stats.copy_(
        torch.tensor([1.0, 0.5])
    )  # a prior that would move logits
    ids = torch.tensor([[256, *b"to be or not to be, that is the question; whether tis nobler"]])
    decision = model(ids).decision
    head_alone = smoke_model("rl", {"policy.context": 3, "prior.weight": 0.0})
    head_alone.load_state_dict(model.state_dict(), strict=False)
    torch.testing.assert_close(decision.logits, head_alone.train()(ids).decision.logits)

    valid = torch.ones_like(ids, dtype=torch.bool)
    nll = torch.rand(ids.shape)
    terms, stats = model.boundary.losses(decision, nll, nll, valid)
    assert "cue" not in stats
    decided = valid.clone()
    decided[:, 0] = False
    target = teacher_ends(model.boundary.prior.cue(model(ids).early_logits, ids), decided, 0.2)
    grad = torch.autograd.grad(terms["teach"], decision.logits)[0]
    # the loss raises the logits of the prior's chunk ends and lowers the others'
    assert (grad[:, 1:][target[:, 1:]] < 0).all() and (grad[:, 1:][~target[:, 1:]] > 0).all()


def test_a_negative_teaching_prior_teaches_the_bottom_share_of_its_cue():
    """A negative beta under --prior-role teach: the head is taught to end chunks where the cue is
    lowest (the batch's bottom --target-rate share), the mirror of a positive beta."""
    from rltok.boundaries.base import decided_positions
    from rltok.boundaries.rl import RLPolicy

    cue = torch.randn(2, 41, generator=torch.Generator().manual_seed(1))
    decided = decided_positions(torch.ones(2, 41, dtype=torch.bool))
    logits = torch.zeros(2, 41, requires_grad=True)
    grads = {}
    for beta in (4.0, -4.0):
        policy = RLPolicy(8, boundary_config({"prior.weight": beta, "prior.role": "teach"}))
        loss = policy.prior.teach_loss(logits, cue, decided, 0.2)
        (grads[beta],) = torch.autograd.grad(loss, logits)
    taught_low = grads[-4.0] < 0  # the loss raises these logits: the prior's chunk ends
    assert taught_low.sum() == 16  # 0.2 of the 80 decided positions
    assert cue[taught_low].max() < cue[decided & ~taught_low].min()
    assert not (taught_low & (grads[4.0] < 0)).any()  # a positive beta teaches the top share


def test_teach_smoothing_holds_the_heads_logits_at_targets_that_keep_the_rate():
    """--teach-smoothing EPS: the teach loss is stationary where the prior's chunk ends sit at
    logit(1 - EPS) and the other bytes at logit(EPS x rate / (1 - rate)): inside the softcap, with the
    rate as the mean probability; hard targets still push the same logits outwards."""
    from rltok.boundaries.base import decided_positions
    from rltok.boundaries.estimator import smoothed, teacher_ends
    from rltok.boundaries.rl import PolicyDecision, RLPolicy

    eps, rate = 0.05, 0.2
    policy = RLPolicy(
        8, boundary_config({"prior.weight": 4.0, "prior.role": "teach", "prior.smoothing": eps})
    ).train()
    cue = torch.randn(2, 21, generator=torch.Generator().manual_seed(0))
    valid = torch.ones(2, 21, dtype=torch.bool)
    decided = decided_positions(valid)
    target = teacher_ends(cue, decided, rate)
    probs = smoothed(target, rate, eps)
    assert float(probs[decided].mean()) == pytest.approx(rate)
    logits = torch.logit(probs).where(decided, 0.0)
    assert float(logits.abs().max()) < policy.cfg.policy.softcap
    logits.requires_grad_()
    decision = PolicyDecision(
        boundaries=target.long(), logits=logits, probs=logits.detach().sigmoid(), cue=cue
    )
    terms, _ = policy.losses(decision, torch.rand(2, 21), torch.rand(2, 21), valid)
    (grad,) = torch.autograd.grad(terms["teach"], logits)
    torch.testing.assert_close(grad, torch.zeros_like(grad), atol=1e-7, rtol=0)

    policy.cfg.prior.smoothing = 0.0  # hard targets: the same logits are still pushed outwards
    terms, _ = policy.losses(decision, torch.rand(2, 21), torch.rand(2, 21), valid)
    (grad,) = torch.autograd.grad(terms["teach"], logits)
    assert (grad[target] < 0).all() and (grad[decided & ~target] > 0).all()


def test_policy_steps_let_the_boundary_method_learn_over_the_first_steps_only():
    """--policy-steps N: the boundary method's learning rate falls linearly to 0 over N optimizer steps;
    every other group follows the schedule alone."""
    from rltok.config import preset
    from rltok.pretrained import build_model
    from rltok.step import make_optimizer, set_learning_rate

    cfg = preset("smoke")
    cfg.boundaries.policy.steps = 10
    model = build_model(cfg)
    optimizer = make_optimizer(model, cfg)
    rates = {}
    for step in (0, 5, 10, 20):
        set_learning_rate(optimizer, cfg, 0.5, model.boundary_method.lr_scale(step))
        rates[step] = [
            (g.get("boundary", False), g["lr"], g["lr_mult"]) for g in optimizer.param_groups
        ]
    for step, groups in rates.items():
        for boundary, lr, mult in groups:
            share = max(0.0, 1 - step / 10) if boundary else 1.0
            assert lr == pytest.approx(cfg.train.lr * 0.5 * mult * share)
    assert any(boundary for boundary, _, _ in rates[0]) and not any(
        lr for boundary, lr, _ in rates[10] if boundary
    )


def test_policy_steps_stop_the_offset_and_the_rollouts_with_the_head():
    """Past --policy-steps N the segmentation stays put: the calibrated rate offset stops moving, the
    rollouts stop, and a resumed run (its buffers loaded) knows where it stands."""
    from rltok.config import preset
    from rltok.pretrained import build_model

    cfg = preset("smoke")
    cfg.boundaries.method = "rl"
    cfg.boundaries.policy.rate_control = "calibrate"
    cfg.boundaries.group.size = 4
    cfg.boundaries.policy.steps = 3
    cfg.boundaries.prior.weight = 0.0  # no prior: its statistics play no part here
    boundary = build_model(cfg.validate()).boundary
    stats = {
        "mean_prob": torch.tensor(0.5),
        "mean_prob_slope": torch.tensor(0.25),
        "policy_entropy": torch.tensor(0.9),
    }
    offsets, grouped = [], []
    for _ in range(5):
        grouped.append(boundary.rollouts(8, 8, torch.device("cpu")) is not None)
        boundary.end_step(stats)
        offsets.append(float(boundary.rate.offset))
    assert offsets[0] > offsets[1] > offsets[2] == offsets[3] == offsets[4]  # too many ends: down
    assert grouped == [True, True, True, False, False]

    resumed = build_model(cfg).boundary
    resumed.load_state_dict(boundary.state_dict())
    resumed.policy_entropy = 0.9
    assert resumed.rollouts(8, 8, torch.device("cpu")) is None and not resumed.learning()


def test_a_rate_schedule_holds_the_starting_rate_then_moves_to_the_target_and_resumes_in_place():
    """rate_from R, rate_hold H, rate_ramp M: an untrained policy ends chunks at R for H steps, then
    linearly to the target over M steps; the calibrated offset aims at the rate of the step it
    follows; a resumed policy (its step count loaded) aims where the run stood."""
    from rltok.boundaries.rl import RLPolicy

    cfg = boundary_config(
        {
            "policy.rate_control": "calibrate",
            "policy.rate_from": 0.4,
            "policy.rate_hold": 2,
            "policy.rate_ramp": 4,
            "prior.weight": 0.0,
        }
    )
    cfg.target_rate = 0.2
    policy = RLPolicy(8, cfg)
    x, ids = torch.randn(3, 50, 8), torch.randint(0, 256, (3, 50))
    early = torch.randn(3, 50, 257)
    aimed, probs = [], []
    for _ in range(8):
        aimed.append(policy.rate_now())
        probs.append(float(policy(x, ids, early).probs.mean()))
        stats = {"mean_prob": torch.tensor(aimed[-1]), "policy_entropy": torch.tensor(0.9)}
        policy.end_step({**stats, "mean_prob_slope": torch.tensor(0.25)})
    assert aimed == pytest.approx([0.4, 0.4, 0.4, 0.35, 0.3, 0.25, 0.2, 0.2])
    # the head at zero and the offset unmoved: the probabilities are the aimed rates (softcap aside)
    assert probs == pytest.approx(aimed, abs=0.005)
    assert float(policy.rate.offset) == 0.0

    resumed = RLPolicy(8, cfg)
    resumed.load_state_dict(RLPolicy(8, cfg).state_dict() | {"steps.steps": torch.tensor(4.0)})
    assert resumed.rate_now() == pytest.approx(0.3)
    unscheduled = boundary_config({"policy.rate_control": "calibrate"})
    assert "steps.steps" not in RLPolicy(8, unscheduled).state_dict()


def test_checkpoints_from_before_the_policy_was_made_of_parts_load_their_buffers():
    """The calibrated offset, the prior's statistics and the step count were the policy's own buffers
    (`rate_offset`, `entropy_stats`, and `schedule.steps` or, earlier, `learned_steps`); they load
    into the parts that keep them now."""
    from rltok.boundaries.rl import RLPolicy

    cfg = boundary_config(
        {"policy.rate_control": "calibrate", "policy.steps": 10, "prior.weight": 2.0}
    )
    policy = RLPolicy(8, cfg)
    assert set(policy.state_dict()) == {
        "head.weight",
        "prior.entropy_stats",
        "rate.rate_offset",
        "steps.steps",
    }
    for old_count in ("schedule.steps", "learned_steps"):
        older = {
            "head.weight": torch.ones(1, 8),
            "rate_offset": torch.tensor(0.5),
            "entropy_stats": torch.tensor([1.0, 2.0]),
            old_count: torch.tensor(3.0),
        }
        policy.load_state_dict(older)
        assert float(policy.rate.offset) == 0.5 and policy.steps.taken() == 3
        assert policy.prior.entropy_stats.tolist() == [1.0, 2.0]
