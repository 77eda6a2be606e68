"""Named learner recipes: each a small set of RL settings with one line on what it is for, so that a
learned row is one name (`rltok train --recipe NAME`, a suite's entry) instead of ten flags.

A recipe sets fields of the boundary config (and of the loss weights) on top of a preset; flags
given beside it override it. Every recipe also exists as NAME-prior-only: the same settings with the
policy loss off, so what the score-function step adds is read against what it learned from (the rate
loss or control and the prior's teaching still train the head there). docs/method.md says what
each setting does; docs/learner.md what each recipe measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltok.config import BoundaryConfig, Config, set_setting
from rltok.errors import UserError

PRIOR_ONLY = "-prior-only"
# settings that act only through the policy loss: off in the prior-only form, so that it logs
# nothing the policy loss would have used
_POLICY_ONLY = {"estimator.rate_neutral": False}


@dataclass(frozen=True)
class Recipe:
    """A learner: the boundary settings and loss weights it changes, and what it is for."""

    name: str
    purpose: str
    boundaries: dict[str, Any]  # dotted paths in BoundaryConfig ("group.size") -> values
    loss: dict[str, Any] = field(default_factory=dict)

    def prior_only(self) -> Recipe:
        """The same learner with its policy loss off (and the settings only that loss reads)."""
        return Recipe(
            self.name + PRIOR_ONLY,
            f"{self.name} with the policy loss off: what the score-function step learns from",
            {**self.boundaries, **_POLICY_ONLY},
            {**self.loss, "policy": 0.0},
        )

    def apply(self, cfg: Config) -> Config:
        """cfg with this recipe's settings (in place; returned for chaining)."""
        for path, value in self.boundaries.items():
            set_setting(cfg.boundaries, path, value)
        for path, value in self.loss.items():
            set_setting(cfg.loss, path, value)
        return cfg


# the group estimator and surprisal prior as the CPU presets set them (whatever a preset says)
_CPU = BoundaryConfig()
_GROUP_PRIOR = {
    "method": "rl",
    "group.size": _CPU.group.size,
    "group.texts": _CPU.group.texts,
    "group.entropy": _CPU.group.entropy,
    "estimator.gamma": _CPU.estimator.gamma,
    "prior.weight": _CPU.prior.weight,
    "prior.cue": _CPU.prior.cue,
}
_ON_MODE = {"policy.lm_segmentation": "greedy", "policy.rate_control": "calibrate"}
_PAPER = {"method": "rl", "group.size": 1, "estimator.gamma": 0.99, "prior.weight": 0.0}
_MODE = {
    **_GROUP_PRIOR,
    **_ON_MODE,
    "prior.cue": "read-entropy",
    "prior.weight": 4.0,
    "policy.lr_mult": 1.0,
}
_BYTE_HEAD = {**_MODE, "policy.context": 3, "prior.role": "teach", "policy.lr_mult": 10.0}
_BYTE_HEAD_LM = {**_BYTE_HEAD, "group.lm": True, "group.entropy": 0.0}

RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in [
        Recipe(
            "group-prior",
            "the CPU presets' rl: the group estimator and a surprisal prior on the next byte's entropy",
            _GROUP_PRIOR,
        ),
        Recipe(
            "group",
            "the group estimator without a prior: the chunk ends come from the reward alone",
            {**_GROUP_PRIOR, "prior.weight": 0.0},
        ),
        Recipe(
            "drop-prior",
            "group-prior with a prior on the drop in entropy: a chunk ends where a hard byte "
            "leaves an easy one",
            {**_GROUP_PRIOR, "prior.cue": "entropy-drop"},
        ),
        Recipe(
            "group-prior-mode",
            "group-prior with the language model on the policy's mode: the same chunks for the "
            "same text, from the first step",
            {**_GROUP_PRIOR, **_ON_MODE},
        ),
        Recipe(
            "drop-prior-mode",
            "drop-prior with the language model on the policy's mode: held chunks that end where a "
            "hard byte leaves an easy one (on Chinese, characters' last bytes)",
            {**_GROUP_PRIOR, "prior.cue": "entropy-drop", **_ON_MODE},
        ),
        Recipe(
            "paper",
            "the paper's estimator: one segmentation per text, no prior, discount 0.99",
            _PAPER,
        ),
        Recipe(
            "paper-scaling",
            "the paper's estimator with its policy scale (1/16), head learning rate and loss weights",
            {**_PAPER, "policy.logit_scale": 1 / 16, "policy.lr_mult": 1.0},
            {"policy": 0.01, "rate": 0.01},
        ),
        Recipe(
            "mode",
            "a prior on word starts (the byte just read), the language model on the policy's mode",
            _MODE,
        ),
        Recipe(
            "mode-neutral",
            "mode with a price per chunk end, so the estimator ranks where chunks end, not how many",
            {**_MODE, "estimator.rate_neutral": True},
        ),
        Recipe(
            "byte-head",
            "a head that reads only the last 3 bytes, taught by mode's prior, priced chunk ends",
            {**_BYTE_HEAD, "estimator.rate_neutral": True},
        ),
        Recipe(
            "byte-head-ease",
            "byte-head taught to end chunks before an easy byte (a negative prior on the next "
            "byte's entropy): on Chinese, where a character ends",
            {
                **_BYTE_HEAD,
                "prior.cue": "entropy",
                "prior.weight": -4.0,
                "estimator.rate_neutral": True,
            },
        ),
        Recipe(
            "byte-head-group-lm",
            "byte-head with the language model also trained on the rollouts, which run every step",
            {**_BYTE_HEAD_LM, "estimator.rate_neutral": True},
        ),
        Recipe(
            "byte-head-smoothed",
            "byte-head-group-lm taught towards smoothed targets, so its rollouts keep varying",
            {**_BYTE_HEAD_LM, "prior.smoothing": 0.1, "estimator.rate_neutral": True},
        ),
    ]
}


def recipe(name: str) -> Recipe:
    """The recipe called `name` (NAME-prior-only: its policy-off form); one sentence if unknown."""
    base = name.removesuffix(PRIOR_ONLY)
    if base not in RECIPES:
        raise UserError(
            f"unknown recipe {name!r}; choose one of: {', '.join(RECIPES)} "
            f"(each also as NAME{PRIOR_ONLY})"
        )
    return RECIPES[base].prior_only() if name != base else RECIPES[base]
