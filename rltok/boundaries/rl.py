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
    StepCount,
    decided_positions,
    force_first,
    mode_noise,
    uniform_noise,
)
from rltok.boundaries.estimator import ScoreFunction, policy_entropy, policy_loss
from rltok.boundaries.local_bytes import LocalBytes, byte_windows
from rltok.boundaries.prior import SurprisalPrior
from rltok.boundaries.rate_control import MEAN_PROB, rate_control
from rltok.config import BoundaryConfig
from rltok.layers.blocks import rms_norm
from rltok.text import BOS


@dataclass
class PolicyDecision(Decision):
    """The policy's decision, with the prior's raw cue at every byte (for `losses`: the statistics
    that standardise the next step's cue, and the teacher's chunk ends)."""

    cue: Tensor | None = None


@dataclass
class PolicyState(OnlineState):
    """The last w - 1 decisions of each row, the early-exit logits of the byte before (the
    surprisal prior's cue reads a window of two positions) and, for a policy that reads bytes, the
    last n - 1 of them."""

    recent: Tensor | None = None  # (B, w - 1): a_{t-1}, ..., a_{t-w+1}
    early_logits: Tensor | None = None  # (B, V)
    recent_ids: Tensor | None = None  # (B, n - 1): byte t-1, ..., t-n+1


# where checkpoints written before the policy was made of parts kept their buffers
_MOVED = {
    "prior_steps": "steps.steps",
    "learned_steps": "steps.steps",
    "schedule.steps": "steps.steps",
    "rate_offset": "rate.rate_offset",
    "entropy_stats": "prior.entropy_stats",
}


def _moved_buffers(module: nn.Module, state: dict, prefix: str, *_: object) -> None:
    """Load older checkpoints' buffers under their current names."""
    for old, new in _MOVED.items():
        if prefix + old in state:
            state[prefix + new] = state.pop(prefix + old)


class RLPolicy(BoundaryMethod):
    """l_t = softcap(scale * raw_t + logit(rate) + offset + beta * z_t), raw_t from the current state (or
    the last N bytes alone, --policy-context) and the last w-1 decisions; the offset from the rate
    control, z_t the surprisal prior's cue (beta = 0 is the paper's policy; under --prior-role teach the
    cue trains the head instead). Made of parts chosen once here: the head, the prior, the rate control
    and the score-function estimator."""

    def __init__(self, d_model: int, cfg: BoundaryConfig):
        super().__init__()
        self.cfg, self.policy, self.group = cfg, cfg.policy, cfg.group
        self.target = cfg.target_rate
        self.scheduled = bool(cfg.policy.rate_from)
        self.lr_mult = cfg.policy.lr_mult
        # --policy-context N: the head reads the last N bytes, not the encoder's state
        self.local = LocalBytes(cfg.policy.context) if cfg.policy.context else None
        features = self.local.mix.out_features if self.local else d_model
        self.head = nn.Linear(features, cfg.policy.window, bias=False)
        nn.init.zeros_(self.head.weight)  # start exactly at the target rate
        self.prior = SurprisalPrior(cfg.prior) if cfg.prior.weight else None
        self.rate = rate_control(cfg.policy.rate_control)
        self.estimator = ScoreFunction(
            gamma=cfg.estimator.gamma,
            early_exit_reward=cfg.estimator.early_exit_reward,
            batch_relative=cfg.estimator.batch_relative,
            rate_neutral=cfg.estimator.rate_neutral,
            grouped=cfg.group.size > 1,
            greedy=cfg.policy.lm_segmentation == "greedy",
        )
        # under --policy-steps, the steps taken decide whether the head still learns; under a rate
        # schedule, the rate it aims at
        self.steps = StepCount() if cfg.policy.steps or self.scheduled else None
        self.register_load_state_dict_pre_hook(_moved_buffers)
        # on the last step's batch: the group estimator runs while high
        self.policy_entropy = math.inf

    def end_step(self, stats: dict[str, Tensor]) -> None:
        """The parts that carry state take this step's statistics (averaged over every micro-batch
        and rank by the trainer, so that every layout of a run decides alike)."""
        learning, rate = self.learning(), self.rate_now()  # as this step stood
        if self.steps is not None:
            self.steps.step()
        self.policy_entropy = float(stats["policy_entropy"])
        if self.prior is not None:
            self.prior.end_step(stats)
        if learning:
            self.rate.end_step(stats, rate)

    def learning(self) -> bool:
        """False once --policy-steps N steps are taken: the segmentation then stays as it is."""
        return not self.policy.steps or self.steps.taken() < self.policy.steps

    def rate_now(self) -> float:
        """The rate aimed at: the target, or under a rate schedule the starting rate for its first
        steps, then a linear move to the target."""
        if not self.scheduled:
            return self.target
        p = self.policy
        moved = min(1.0, max(0, self.steps.taken() - p.rate_hold) / max(1, p.rate_ramp))
        return p.rate_from + moved * (self.target - p.rate_from)

    @property
    def reads_greedily(self) -> bool:
        return self.policy.lm_segmentation == "greedy"

    @property
    def lm_on_rollouts(self) -> bool:
        return self.group.lm

    def lr_scale(self, step: int) -> float:
        """Under --policy-steps N, falls linearly to 0 over the first N optimizer steps."""
        steps = self.policy.steps
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
        share of `texts`), while the policy is uncertain (last step's entropy above the threshold)."""
        group = self.group
        if group.size == 1 or self.policy_entropy <= group.entropy or not self.learning():
            return None
        texts = max(1, group.texts * rows // batch_size) if group.texts else rows
        return torch.arange(min(texts, rows), device=device).repeat_interleave(group.size - 1)

    def share_across(self, sum_across: Callable[[Tensor], Tensor]) -> None:
        """With --global-centering, batch-relative rewards are centred over every rank's rows."""
        self.estimator.sum_across = sum_across if self.cfg.estimator.global_centering else None

    def carried_state(self) -> dict[str, float]:
        """The last step's policy entropy, which decides whether the next step groups."""
        return {"policy_entropy": self.policy_entropy}

    def restore_state(self, state: dict) -> None:
        """The policy entropy of the checkpoint's last step (unknown, so grouping, if not saved)."""
        self.policy_entropy = state.get("policy_entropy", math.inf)

    def _squash(self, raw: Tensor, prior: Tensor | float) -> Tensor:
        rate = self.rate_now()
        logit = (
            self.policy.logit_scale * raw + math.log(rate / (1.0 - rate)) + prior + self.rate.offset
        )
        cap = self.policy.softcap
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
        cue = None if self.prior is None else self.prior.cue(early_logits, ids)
        prior = 0.0 if cue is None else self.prior.logit_term(cue)
        noise = uniform_noise(noise, x)
        if forced is not None:
            actions = force_first(forced)
        elif self.policy.window == 1:
            actions = force_first(noise < torch.sigmoid(self._squash(v[..., 0].detach(), prior)))
        else:
            actions = force_first(self._sample_sequential(v.detach(), prior, noise))
        logits = self._logits_given(v, prior, actions)
        return PolicyDecision(
            boundaries=actions,
            logits=logits,
            probs=torch.sigmoid(logits.detach()),
            cue=cue if self.training else None,
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
        if self.prior is not None and not self.prior.teaches:
            # the cue of the window (previous position, this one), as forward computes it; alone at BOS
            window = (
                [early_logits] if state.early_logits is None else [state.early_logits, early_logits]
            )
            state.early_logits = early_logits
            ids_window = torch.stack([ids] * len(window), 1)  # only the last one's byte is read
            prior = self.prior.logit_term(self.prior.cue(torch.stack(window, 1), ids_window)[:, -1])
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
        actions, probs, decided = decision.boundaries, decision.probs, decided_positions(valid)
        returns, learns, stats = self.estimator.returns(
            actions, probs, nll, early_nll, valid, groups, self.learning()
        )
        terms = {"policy": policy_loss(decision.logits, actions, returns, learns)}
        cue, rate = decision.cue, self.rate_now()
        if cue is not None and self.prior.teaches:  # the head learns the prior's chunk ends
            terms["teach"] = self.prior.teach_loss(decision.logits, cue, decided, rate)
        terms.update(self.rate.terms(decision.logits, decided, rate))
        n = decided.sum().clamp(min=1)
        stats[MEAN_PROB] = (probs * decided).sum() / n
        stats["policy_entropy"] = policy_entropy(probs, decided)
        stats.update(self.rate.measure(probs, decided))
        if cue is not None:
            stats.update(self.prior.measure(cue))
        if self.group.size > 1:  # how many rows were the group estimator's extra segmentations
            own = torch.arange(len(nll), device=nll.device) if groups is None else groups
            stats["rollouts"] = (own != torch.arange(len(own), device=own.device)).sum().float()
        return terms, stats
