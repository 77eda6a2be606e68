"""The RL boundary policy: a Bernoulli decision per byte trained with a time-discounted score-function
estimator, an early-exit relative reward and batch-relative advantages, or, when
texts are segmented several times, leave-one-out advantages within each text (docs/method.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rltok.boundaries.base import (
    BoundaryMethod,
    Decision,
    OnlineDecision,
    OnlineState,
    RateSchedule,
    byte_surprisal,
    decided_positions,
    force_first,
    mode_noise,
    next_byte_entropy,
    uniform_noise,
)
from rltok.boundaries.estimator import (
    batch_relative,
    discounted_returns,
    leave_one_out,
    mode_threshold,
    policy_entropy,
    policy_loss,
    rate_loss,
    rate_neutral,
    smoothed,
    teacher_ends,
)
from rltok.config import BoundaryConfig, Config
from rltok.errors import UserError
from rltok.layers.blocks import rms_norm
from rltok.text import BOS


def byte_windows(ids: Tensor, n: int) -> Tensor:
    """(B, L, n): at each position the bytes t, t-1, ..., t-n+1 (BOS before the start)."""
    L = ids.size(1)
    return torch.stack([F.pad(ids, (k, 0), value=BOS)[:, :L] for k in range(n)], -1)


class LocalBytes(nn.Module):
    """Features of the last n bytes alone (their embeddings through one hidden layer): whatever reads
    them decides the same way wherever the same bytes occur."""

    def __init__(self, n: int, dim: int = 32, hidden: int = 64):
        super().__init__()
        self.n = n
        self.embed = nn.Embedding(BOS + 1, dim)
        self.mix = nn.Linear(n * dim, hidden)

    def forward(self, windows: Tensor) -> Tensor:
        """(..., n) byte ids -> (..., hidden) features."""
        return F.gelu(self.mix(self.embed(windows).flatten(-2)))


@dataclass
class PolicyDecision(Decision):
    """The policy's decision, with the prior's cue at every byte under --prior-role teach (for
    `losses`, which turns it into the prior's chunk ends)."""

    teach_cue: Tensor | None = None


@dataclass
class PolicyState(OnlineState):
    """The last w - 1 decisions of each row, the early-exit logits of the byte before (the
    surprisal prior's cue reads a window of two positions) and, for a policy that reads bytes, the
    last n - 1 of them."""

    recent: Tensor | None = None  # (B, w - 1): a_{t-1}, ..., a_{t-w+1}
    early_logits: Tensor | None = None  # (B, V)
    recent_ids: Tensor | None = None  # (B, n - 1): byte t-1, ..., t-n+1


def _one_step_count(module: nn.Module, state: dict, prefix: str, *_: object) -> None:
    """Checkpoints from before the one step count kept it as `prior_steps` or `learned_steps`."""
    for old in ("prior_steps", "learned_steps"):
        if prefix + old in state:
            state[prefix + "schedule.steps"] = state.pop(prefix + old)


def check_given(cfg: Config, given: set[str]) -> None:
    """One sentence for an RL setting given on the command line (`given`: the fields set by flags)
    that this run cannot use as asked."""
    b, t = cfg.boundaries, cfg.train
    if "group_size" in given and b.group_size != 1 and b.method != "rl":
        raise UserError(
            f"--group-size {b.group_size} needs --boundaries rl (the group estimator trains the "
            f"RL policy; {b.method} has none)"
        )
    if "group_texts" in given and b.group_texts > t.batch_size:
        raise UserError(
            f"--group-texts {b.group_texts} exceeds the {t.batch_size} texts of a batch; pass at "
            "most --batch-size, or 0 for all of them"
        )


class RLPolicy(BoundaryMethod):
    """l_t = softcap(scale * raw_t + logit(target) + beta * z_t), raw_t from the current state (or the
    last N bytes alone, --policy-context) and the last w-1 decisions, z_t a standardised cue of the
    early-exit head (the surprisal prior; beta = 0 is the paper's policy): the entropy of its next-byte
    prediction, or its surprisal at the byte just read. With --prior-role teach the cue trains the head
    instead of adding to its logits."""

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()
        self.cfg = cfg
        self.lr_mult = cfg.policy_lr_mult
        # --policy-context N: the head reads the last N bytes, not the encoder's state
        self.local = LocalBytes(cfg.policy_context) if cfg.policy_context else None
        features = self.local.mix.out_features if self.local else d_model
        self.head = nn.Linear(features, cfg.policy_window, bias=False)
        nn.init.zeros_(self.head.weight)  # start exactly at the target rate
        # its step count also sets how far the prior has faded and whether the head still learns
        self.schedule = RateSchedule(cfg, counted=bool(cfg.prior_fade or cfg.policy_steps))
        self.register_load_state_dict_pre_hook(_one_step_count)
        # a shift of every logit, set after each step to hit the rate
        if cfg.rate_control in ("calibrate", "mode"):
            self.register_buffer("rate_offset", torch.zeros(()))
        # mean and std of the entropy over the previous optimizer step's batch
        if cfg.surprisal_prior:
            self.register_buffer("entropy_stats", torch.tensor([float("nan"), float("nan")]))
        # on the last step's batch: the group estimator runs while high
        self.policy_entropy = math.inf
        self.sum_across: Callable[[Tensor], Tensor] | None = (
            None  # global centering, under torchrun
        )

    def _cue(self, early_logits: Tensor, ids: Tensor) -> Tensor:
        """The prior's raw cue at every byte (B, L), in nats, without gradient."""
        if self.cfg.prior_cue == "entropy":
            return next_byte_entropy(early_logits)
        # the entropy of the prediction of the byte just read
        if self.cfg.prior_cue == "read-entropy":
            return F.pad(next_byte_entropy(early_logits)[:, :-1], (1, 0))
        return byte_surprisal(early_logits, ids)

    def _prior(self, cue: Tensor | None, stats: dict[str, Tensor] | None = None) -> Tensor | float:
        """beta * the cue standardised with the previous step's statistics; a feature without
        parameters, so the score-function estimator stays unbiased. In training, this batch's
        statistics go into `stats` for `end_step`."""
        if not self.cfg.surprisal_prior:
            return 0.0
        if self.training and stats is not None:
            stats.update(early_entropy=cue.mean(), early_entropy_std=cue.std().clamp(min=1e-3))
            if self.cfg.prior_fade:
                stats["prior_weight"] = torch.as_tensor(self.prior_weight(), device=cue.device)
        if self.cfg.prior_role == "teach":
            return 0.0  # the prior trains the head (`losses`), the head alone decides
        mean, std = self.entropy_stats
        # before the first step the statistics are unknown (NaN) and the prior is 0: chance
        return self.prior_weight() * ((cue - mean) / std).nan_to_num(0.0)

    def prior_weight(self) -> float:
        """beta, or with --prior-fade N, beta x (1 - steps / N) until it reaches 0."""
        if not self.cfg.prior_fade:
            return self.cfg.surprisal_prior
        left = max(0.0, 1.0 - self.schedule.taken() / self.cfg.prior_fade)
        return self.cfg.surprisal_prior * left

    def end_step(self, stats: dict[str, Tensor]) -> None:
        """The next step's prior standardises with this step's cue statistics, and the calibrated rate
        offset takes one Newton step towards the target rate; the trainer has averaged both over every
        micro-batch and rank, so that every layout of a run decides alike."""
        rate, learning = self.schedule.rate(), self.learning()  # as this step stood
        self.schedule.step()
        if "policy_entropy" in stats:
            self.policy_entropy = float(stats["policy_entropy"])
        if "early_entropy" in stats:
            self.entropy_stats.copy_(
                torch.stack([stats["early_entropy"], stats["early_entropy_std"]]).float()
            )
        if self.cfg.rate_control == "calibrate" and "mean_prob" in stats and learning:
            # mean_prob(offset) is increasing, so Newton's step on mean_prob = target; bounded, since the
            # slope is tiny when the policy is confident
            step = (rate - stats["mean_prob"]) / stats["mean_prob_slope"].clamp(min=1e-3)
            self.rate_offset.add_(step.float().clamp(-1.0, 1.0))
        if self.cfg.rate_control == "mode" and "mode_threshold" in stats and learning:
            self.rate_offset.sub_(stats["mode_threshold"].float())

    def learning(self) -> bool:
        """False once --policy-steps N steps are taken: the segmentation then stays as it is."""
        return not self.cfg.policy_steps or self.schedule.taken() < self.cfg.policy_steps

    @property
    def reads_greedily(self) -> bool:
        return self.cfg.lm_segmentation == "greedy"

    @property
    def lm_on_rollouts(self) -> bool:
        return self.cfg.group_lm

    def lr_scale(self, step: int) -> float:
        """Under --policy-steps N, falls linearly to 0 over the first N optimizer steps."""
        steps = self.cfg.policy_steps
        return max(0.0, 1.0 - step / steps) if steps else 1.0

    def training_noise(
        self, rows: int, rollouts: int, length: int, device: torch.device
    ) -> Tensor | None:
        """With the language model on the policy's mode, the batch's rows take the mode (uniforms of
        1/2: a = [p > 0.5]) and the rollouts sample."""
        if not self.reads_greedily:
            return None
        noise = torch.rand(rows + rollouts, length, device=device)
        noise[:rows] = mode_noise((rows, length), device)
        return noise

    def rollouts(self, rows: int, batch_size: int, device: torch.device) -> Tensor | None:
        """The group estimator's extra segmentations: K - 1 more of each grouped text (the micro-batch's
        share of `group_texts`), while the policy is uncertain (last step's entropy above the threshold)."""
        cfg = self.cfg
        if cfg.group_size == 1 or self.policy_entropy <= cfg.group_entropy or not self.learning():
            return None
        texts = max(1, cfg.group_texts * rows // batch_size) if cfg.group_texts else rows
        return torch.arange(min(texts, rows), device=device).repeat_interleave(cfg.group_size - 1)

    def share_across(self, sum_across: Callable[[Tensor], Tensor]) -> None:
        """With --global-centering, batch-relative rewards are centred over every rank's rows."""
        self.sum_across = sum_across if self.cfg.global_centering else None

    def carried_state(self) -> dict[str, float]:
        """The last step's policy entropy, which decides whether the next step groups."""
        return {"policy_entropy": self.policy_entropy}

    def restore_state(self, state: dict) -> None:
        """The policy entropy of the checkpoint's last step (unknown, so grouping, if not saved)."""
        self.policy_entropy = state.get("policy_entropy", math.inf)

    def _squash(self, raw: Tensor, prior: Tensor | float) -> Tensor:
        rate = self.schedule.rate()
        logit = self.cfg.logit_scale * raw + math.log(rate / (1.0 - rate)) + prior
        if self.cfg.rate_control in ("calibrate", "mode"):
            logit = logit + self.rate_offset
        cap = self.cfg.softcap
        return cap * torch.tanh(logit / cap) if cap > 0 else logit

    def _logits_given(self, v: Tensor, prior: Tensor | float, actions: Tensor) -> Tensor:
        """Logits for known decisions, computed in parallel: raw_t = v[t, w-1] + sum_k a[t-k] v[t, w-1-k]."""
        w = v.size(-1)
        raw = v[..., w - 1]
        for k in range(1, w):
            # a[t - k], 0 before the start
            previous = F.pad(actions, (k, 0))[:, : actions.size(1)].to(v.dtype)
            raw = raw + previous * v[..., w - 1 - k]
        return self._squash(raw, prior)

    @torch.no_grad()
    def _sample_sequential(self, v: Tensor, prior: Tensor | float, noise: Tensor) -> Tensor:
        """Windowed policy: each decision feeds the next logit, so sample one byte at a time."""
        B, L, w = v.shape
        actions = torch.zeros(B, L, dtype=torch.long, device=v.device)
        recent = v.new_zeros(B, w - 1)  # a_{t-1}, ..., a_{t-w+1}
        weights = v[..., : w - 1].flip(-1)  # v[t, w-2], ..., v[t, 0]
        prior = torch.as_tensor(prior, device=v.device).expand(B, L)
        for t in range(L):
            logit = self._squash(v[:, t, w - 1] + (recent * weights[:, t]).sum(-1), prior[:, t])
            a = (noise[:, t] < torch.sigmoid(logit)) | (t == 0)
            actions[:, t] = a.long()
            recent = torch.cat([a[:, None].to(v.dtype), recent[:, :-1]], dim=1)
        return actions

    def features(self, x: Tensor, ids: Tensor) -> Tensor:
        """What the head reads at every byte (B, L, F): the last N bytes under --policy-context, else
        the normalised encoder state."""
        return self.local(byte_windows(ids, self.local.n)) if self.local else rms_norm(x)

    def forward(
        self,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor | None = None,
        forced: Tensor | None = None,
    ) -> Decision:
        v = self.head(self.features(x, ids)).float()
        stats: dict[str, Tensor] = {}
        cue = self._cue(early_logits, ids) if self.cfg.surprisal_prior else None
        prior = self._prior(cue, stats)
        teaches = self.training and self.cfg.prior_role == "teach"
        noise = uniform_noise(noise, x)
        if forced is not None:
            actions = force_first(forced)
        elif self.cfg.policy_window == 1:
            actions = force_first(noise < torch.sigmoid(self._squash(v[..., 0].detach(), prior)))
        else:
            actions = force_first(self._sample_sequential(v.detach(), prior, noise))
        logits = self._logits_given(v, prior, actions)
        return PolicyDecision(
            boundaries=actions,
            logits=logits,
            probs=torch.sigmoid(logits.detach()),
            stats=stats,
            teach_cue=cue if teaches else None,
        )

    def online_state(self) -> PolicyState:
        return PolicyState()

    def online(
        self,
        state: PolicyState,
        x: Tensor,
        ids: Tensor,
        early_logits: Tensor,
        noise: Tensor,
        t: int,
    ) -> OnlineDecision:
        if self.local:
            n = self.local.n
            before = (
                ids.new_full((len(ids), n - 1), BOS)
                if state.recent_ids is None
                else state.recent_ids
            )
            window = torch.cat([ids[:, None], before], dim=1)  # byte t, t-1, ..., t-n+1
            state.recent_ids = window[:, : n - 1]
            v = self.head(self.local(window)).float()
        else:
            v = self.head(rms_norm(x)).float()
        w = v.size(-1)
        recent = v.new_zeros(len(v), w - 1) if state.recent is None else state.recent
        prior = 0.0
        if self.cfg.surprisal_prior and self.cfg.prior_role == "decide":
            # the cue of the window (previous position, this one), as forward computes it; alone at BOS
            window = (
                [early_logits] if state.early_logits is None else [state.early_logits, early_logits]
            )
            state.early_logits = early_logits
            ids_window = torch.stack([ids] * len(window), 1)  # only the last one's byte is read
            prior = self._prior(self._cue(torch.stack(window, 1), ids_window)[:, -1])
        probs = torch.sigmoid(
            self._squash(v[:, w - 1] + (recent * v[:, : w - 1].flip(-1)).sum(-1), prior)
        )
        ends = (noise.to(probs.device) < probs) | (t == 0)
        state.recent = torch.cat([ends[:, None].float(), recent], dim=1)[:, : w - 1]
        return OnlineDecision(ends, probs)

    def losses(
        self,
        decision: PolicyDecision,
        nll: Tensor,
        early_nll: Tensor,
        valid: Tensor,
        groups: Tensor | None = None,
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        cfg = self.cfg
        reward = -nll.detach().float()
        # the early-exit head sees no boundary: a baseline that costs no bias
        if cfg.early_exit_reward:
            reward = reward + early_nll.detach().float()
        reward = reward * valid
        decided = decided_positions(valid)
        # the batch's extra segmentations: rows whose text is another row
        extra = (
            None if groups is None else groups != torch.arange(len(groups), device=groups.device)
        )
        # --rate-neutral: one unit of price per chunk end, centred as the rewards are
        price = decision.boundaries.float() * valid if cfg.rate_neutral else None
        if groups is not None:  # several segmentations of a text: centre on the others of its group
            samples = valid
            if cfg.lm_segmentation == "greedy":
                # the batch's rows are the policy's mode, no sample of it: the rollouts learn, each
                # centred on the other rollouts of its text (the mode, which the language model
                # trained on, would score above them all and only add noise)
                samples = valid & extra[:, None]
            reward, signal = leave_one_out(reward, groups, samples)
            if price is not None:
                price = leave_one_out(price, groups, samples)[0]
            learns = decided & signal  # a text segmented once carries no signal; it must not dilute
        elif cfg.group_size > 1 or not self.learning():
            # the group estimator between its rollouts (the policy is confident): no score-function step,
            # since the paper's batch-relative fallback drifted confident policies off the word edge;
            # and none past --policy-steps, where it would still reach the encoder
            learns = torch.zeros_like(decided)
        else:
            if cfg.batch_relative:
                reward = batch_relative(reward, valid, self.sum_across)
                if price is not None:
                    price = batch_relative(price, valid, self.sum_across)
            learns = decided
        returns = discounted_returns(reward, cfg.gamma, valid)
        neutral = {}
        if price is not None:
            returns, lam = rate_neutral(
                returns,
                discounted_returns(price, cfg.gamma, valid),
                decision.boundaries,
                decision.probs,
                learns,
            )
            neutral["boundary_price"] = lam
        terms = {"policy": policy_loss(decision.logits, decision.boundaries, returns, learns)}
        cue = decision.teach_cue
        if cue is not None:  # --prior-role teach: the head learns the prior's chunk ends
            rate = self.schedule.rate()
            bce = F.binary_cross_entropy_with_logits(
                decision.logits,
                smoothed(teacher_ends(cue, decided, rate), rate, cfg.teach_smoothing),
                reduction="none",
            )
            terms["teach"] = (bce * decided).sum() / decided.sum().clamp(min=1)
        if cfg.rate_control == "loss":
            terms["rate"] = rate_loss(decision.logits, decided, self.schedule.rate())
        n = decided.sum().clamp(min=1)
        stats = {
            "mean_prob": (decision.probs * decided).sum() / n,
            "policy_entropy": policy_entropy(decision.probs, decided),
            **decision.stats,
            **neutral,
        }  # the surprisal prior's statistics, for `end_step`
        # d mean_prob / d offset, for the Newton step of `end_step`
        if cfg.rate_control == "calibrate":
            stats["mean_prob_slope"] = (decision.probs * (1 - decision.probs) * decided).sum() / n
        if cfg.rate_control == "mode":  # on the batch's own rows, which take the mode
            own = decided if extra is None else decided & ~extra[:, None]
            stats["mode_threshold"] = mode_threshold(
                decision.logits.detach(), own, self.schedule.rate(), cfg.softcap
            )
        if cfg.group_size > 1:
            rollouts = torch.zeros((), device=nll.device) if extra is None else extra.sum().float()
            stats["rollouts"] = rollouts
        return terms, stats
