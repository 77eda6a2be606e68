"""The suites of `rltok compare`: each entry is a name and the config fields it changes; `select`
picks a suite's entries by --methods and `entry_config` applies one to a base config."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from rltok.config import BoundaryConfig, Config
from rltok.errors import UserError


@dataclass
class Entry:
    """One row of a suite: a name and the config fields it changes."""

    name: str
    boundaries: dict = field(default_factory=dict)
    loss: dict = field(default_factory=dict)
    seeded: bool = False  # noisy methods run with several seeds
    prior_of: str = ""  # the learned entry this one is with its policy loss off: read in pairs


_PAPER_RL = {"logit_scale": 1 / 16, "policy_lr_mult": 1.0}
# the paper's estimator: one segmentation per text, no prior
_RL = {"method": "rl", "group_size": 1, "gamma": 0.99, "surprisal_prior": 0.0}
# the group estimator and surprisal prior with the settings of the CPU presets (whatever the suite's preset says)
_RL_GROUP = {
    "method": "rl",
    **{
        name: getattr(BoundaryConfig(), name)
        for name in (
            "group_size",
            "group_texts",
            "group_entropy",
            "gamma",
            "surprisal_prior",
            "prior_cue",
        )
    },
}
_MODE = {
    **_RL_GROUP,
    "lm_segmentation": "greedy",
    "prior_cue": "read-entropy",
    "surprisal_prior": 4.0,
    "rate_control": "calibrate",
    "policy_lr_mult": 1.0,
}
_BYTE_HEAD = {**_MODE, "policy_context": 3, "prior_role": "teach", "policy_lr_mult": 10.0}
_BYTE_HEAD_LM = {**_BYTE_HEAD, "group_lm": True, "group_entropy": 0.0}
_BYTE_HEAD_SOFT = {**_BYTE_HEAD_LM, "teach_smoothing": 0.1}
# what the CPU preset's policy does without its score-function step: the prior and the rate loss alone
_PRIOR_ONLY = Entry("rl-prior-only", _RL_GROUP, {"policy": 0.0}, seeded=True, prior_of="rl-group")
SUITES: dict[str, list[Entry]] = {
    "paper": [
        Entry("rl-group", _RL_GROUP, seeded=True),
        _PRIOR_ONLY,
        Entry("rl", _RL, seeded=True),
        Entry("rl-w8", {**_RL, "policy_window": 8}),
        Entry("uniform", {"method": "uniform"}, seeded=True),
        Entry("nawrot", {"method": "nawrot"}, seeded=True),
        Entry("hnet", {"method": "hnet"}, seeded=True),
        Entry("stride", {"method": "stride"}),
        # the fixed segmentations a learned one must beat, with as many seeds
        Entry("whitespace", {"method": "whitespace"}, seeded=True),
        Entry("word-start", {"method": "word-start"}, seeded=True),
        Entry("entropy", {"method": "entropy"}),
        Entry("bpe", {"method": "bpe"}, seeded=True),
        Entry("flat", {"method": "flat"}),
        Entry("bpe-lm", {"method": "bpe-lm"}),
    ],
    "ablations": [
        Entry("rl-group", _RL_GROUP, seeded=True),
        _PRIOR_ONLY,
        Entry("rl-group-no-prior", {**_RL_GROUP, "surprisal_prior": 0.0}, seeded=True),
        # the prior read from the surprisal of the byte just read: the estimator, not the prior, moves
        # the chunk ends to word starts
        Entry("rl-group-surprisal-cue", {**_RL_GROUP, "prior_cue": "surprisal"}, seeded=True),
        Entry(
            "rl-prior-only-surprisal-cue",
            {**_RL_GROUP, "prior_cue": "surprisal"},
            {"policy": 0.0},
            seeded=True,
            prior_of="rl-group-surprisal-cue",
        ),
        # the language model trains on the policy's mode; the prior reads the entropy of the byte
        # just read, and the head learns from the reward alone (docs/learner.md)
        Entry("rl-group-mode", _MODE, seeded=True),
        Entry("rl-prior-only-mode", _MODE, {"policy": 0.0}, seeded=True, prior_of="rl-group-mode"),
        # the same with a price per chunk end in the reward that leaves the rate to the offset
        Entry("rl-group-mode-neutral", {**_MODE, "rate_neutral": True}, seeded=True),
        # a head that reads only the last 3 bytes, taught by the prior, so the same bytes are cut alike
        # everywhere (docs/method.md); with the estimator, and without it
        Entry("rl-byte-head", {**_BYTE_HEAD, "rate_neutral": True}, seeded=True),
        Entry(
            "rl-prior-only-byte-head",
            _BYTE_HEAD,
            {"policy": 0.0},
            seeded=True,
            prior_of="rl-byte-head",
        ),
        # the same, the language model also trained on the rollouts, which run at every step
        Entry("rl-byte-head-group-lm", {**_BYTE_HEAD_LM, "rate_neutral": True}, seeded=True),
        Entry(
            "rl-prior-only-byte-head-group-lm",
            _BYTE_HEAD_LM,
            {"policy": 0.0},
            seeded=True,
            prior_of="rl-byte-head-group-lm",
        ),
        # and taught towards smoothed targets, so the head stays unsure and its rollouts keep varying
        Entry("rl-byte-head-smoothed", {**_BYTE_HEAD_SOFT, "rate_neutral": True}, seeded=True),
        Entry(
            "rl-prior-only-byte-head-smoothed",
            _BYTE_HEAD_SOFT,
            {"policy": 0.0},
            seeded=True,
            prior_of="rl-byte-head-smoothed",
        ),
        Entry("rl", _RL, seeded=True),
        Entry("rl-gamma1", {**_RL, "gamma": 1.0}),
        Entry("rl-no-early-exit", {**_RL, "early_exit_reward": False}),
        Entry("rl-no-batch-relative", {**_RL, "batch_relative": False}),
        Entry("rl-w8", {**_RL, "policy_window": 8}),
        Entry("rl-no-rate-loss", _RL, {"rate": 0.0}),
        Entry("rl-paper-scaling", {**_RL, **_PAPER_RL}, {"policy": 0.01, "rate": 0.01}),
    ],
}
SUITES["all"] = SUITES["paper"] + [
    e for e in SUITES["ablations"] if e.name not in {e.name for e in SUITES["paper"]}
]


def select(suite: str, only: list[str] | None = None) -> list[Entry]:
    """The entries of a suite, in its order, or only the named ones (all of them in the suite)."""
    if suite not in SUITES:
        raise UserError(f"unknown suite {suite!r}; choose one of: {', '.join(SUITES)}")
    entries = [e for e in SUITES[suite] if only is None or e.name in only]
    unknown = set(only or []) - {e.name for e in SUITES[suite]}
    if unknown or not entries:
        raise UserError(
            f"--methods {', '.join(sorted(unknown)) or '(none)'} not in the {suite} suite; "
            f"choose from: {', '.join(e.name for e in SUITES[suite])}"
        )
    return entries


def entry_config(entry: Entry, base: Config, seed: int) -> Config:
    """The base config with an entry's changes and the seed applied."""
    cfg = Config.from_dict(json.loads(base.to_json()))
    for name, value in entry.boundaries.items():
        setattr(cfg.boundaries, name, value)
    for name, value in entry.loss.items():
        setattr(cfg.loss, name, value)
    cfg.train.seed = seed
    return cfg.validate()
