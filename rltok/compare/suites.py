"""The suites of `rltok compare`: each entry is a name, a learner recipe or a method, and the config
fields it changes; `select` picks a suite's entries by --methods and `entry_config` applies one to a
base config."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from rltok.config import Config, set_setting
from rltok.errors import UserError
from rltok.recipes import PRIOR_ONLY, recipe

# the boundary methods learned by a straight-through estimator (H-Net, Nawrot): read against the
# rules and the oracle like the learner's recipes
STRAIGHT_THROUGH = ("hnet", "nawrot")


@dataclass
class Entry:
    """One row of a suite: a learner recipe (rltok.recipes) or a method, and the fields it changes
    on top."""

    name: str
    recipe: str = ""  # a learner recipe's name (NAME-prior-only: its policy-off form)
    boundaries: dict = field(default_factory=dict)
    loss: dict = field(default_factory=dict)
    seeded: bool = False  # noisy methods run with several seeds
    prior_of: str = ""  # the learned entry this one is with its policy loss off: read in pairs

    @property
    def learned(self) -> bool:
        """Whether its boundaries are learned: a learner recipe, or a straight-through method."""
        return bool(self.recipe) or self.boundaries.get("method") in STRAIGHT_THROUGH


def _method(name: str, method: str = "", seeded: bool = True) -> Entry:
    """A row that is a boundary method with its own defaults."""
    return Entry(name, boundaries={"method": method or name}, seeded=seeded)


def _learned(name: str, recipe_name: str, prior_only: str = "", **changes: dict) -> list[Entry]:
    """A learned row from its recipe, and, when `prior_only` names it, its policy-off row."""
    rows = [Entry(name, recipe_name, **changes, seeded=True)]
    if prior_only:
        rows.append(
            Entry(prior_only, recipe_name + PRIOR_ONLY, **changes, seeded=True, prior_of=name)
        )
    return rows


SUITES: dict[str, list[Entry]] = {
    "paper": [
        *_learned("rl-group", "group-prior", "rl-prior-only"),
        Entry("rl", "paper", seeded=True),
        Entry("rl-w8", "paper", {"policy.window": 8}),
        _method("uniform"),
        _method("nawrot"),
        _method("hnet"),
        _method("stride", seeded=False),
        # the fixed segmentations a learned one must beat, with as many seeds
        _method("whitespace"),
        _method("word-start"),
        _method("entropy", seeded=False),
        _method("bpe"),
        _method("flat", seeded=False),
        _method("bpe-lm", seeded=False),
    ],
    "ablations": [
        *_learned("rl-group", "group-prior", "rl-prior-only"),
        Entry("rl-group-no-prior", "group-prior", {"prior.weight": 0.0}, seeded=True),
        # the prior read from the surprisal of the byte just read: the estimator, not the prior, moves
        # the chunk ends to word starts
        *_learned(
            "rl-group-surprisal-cue",
            "group-prior",
            "rl-prior-only-surprisal-cue",
            boundaries={"prior.cue": "surprisal"},
        ),
        # the language model trains on the policy's mode (docs/learner.md)
        *_learned("rl-group-mode", "mode", "rl-prior-only-mode"),
        Entry("rl-group-mode-neutral", "mode-neutral", seeded=True),
        *_learned("rl-byte-head", "byte-head", "rl-prior-only-byte-head"),
        *_learned(
            "rl-byte-head-group-lm", "byte-head-group-lm", "rl-prior-only-byte-head-group-lm"
        ),
        *_learned(
            "rl-byte-head-smoothed", "byte-head-smoothed", "rl-prior-only-byte-head-smoothed"
        ),
        # the smoothed byte head and uniform at the word-start rule's rate on the English corpus
        # (0.176 of its bytes start a word), so the rule is read against rows at its own rate
        *_learned(
            "rl-byte-head-smoothed-rule-rate",
            "byte-head-smoothed",
            "rl-prior-only-byte-head-smoothed-rule-rate",
            boundaries={"target_rate": 0.176},
        ),
        Entry(
            "uniform-rule-rate", boundaries={"method": "uniform", "target_rate": 0.176}, seeded=True
        ),
        Entry("rl", "paper", seeded=True),
        Entry("rl-gamma1", "paper", {"estimator.gamma": 1.0}),
        Entry("rl-no-early-exit", "paper", {"estimator.early_exit_reward": False}),
        Entry("rl-no-batch-relative", "paper", {"estimator.batch_relative": False}),
        Entry("rl-w8", "paper", {"policy.window": 8}),
        Entry("rl-no-rate-loss", "paper", loss={"rate": 0.0}),
        Entry("rl-paper-scaling", "paper-scaling"),
    ],
}
# text written without spaces, scored against its gold words (rltok data prepare chinese,
# english-nospace): the learners that matter with their prior-only rows, every rule a user can apply
# there (whitespace and word-start degenerate without spaces: on Chinese they end chunks inside
# characters), and the gold oracle on either edge of the words
_NO_SPACES = [
    *_learned("rl-group", "group-prior", "rl-prior-only"),
    *_learned("rl-byte-head", "byte-head", "rl-prior-only-byte-head"),
    *_learned("rl", "paper", "rl-prior-only-paper"),
    _method("hnet"),
    _method("nawrot"),
    _method("uniform"),
    # every rule that may be the best one runs on the learners' seeds, so that they pair by seed
    _method("stride"),
    _method("char"),
    _method("entropy"),
    _method("bpe"),
    _method("gold"),
    # the same oracle on each word's last byte, the edge the character rule ends on
    _method("gold-end"),
    _method("whitespace", seeded=False),
    _method("word-start", seeded=False),
    _method("flat", seeded=False),
    _method("bpe-lm", seeded=False),
]
SUITES["english-nospace"] = _NO_SPACES
# on Chinese one chunk per character ends chunks at 0.336 of the bytes (the test split): the preset
# also runs at that rate, so the character rule is read against a learner at its own rate
SUITES["chinese"] = [
    *_NO_SPACES,
    # learners measured here first: without the prior (which ends chunks on characters' first bytes),
    # with a prior on the drop in entropy, and with the language model on the policy's mode (the
    # main network learns only from chunks that stay put)
    *_learned("rl-group-no-prior", "group", "rl-prior-only-group"),
    *_learned("rl-drop-prior", "drop-prior", "rl-prior-only-drop-prior"),
    *_learned("rl-group-mode", "group-prior-mode", "rl-prior-only-group-mode"),
    *_learned(
        "rl-group-char-rate",
        "group-prior",
        "rl-prior-only-char-rate",
        boundaries={"target_rate": 0.336},
    ),
    # the same on the policy's mode, and with the prior on the drop in entropy (which ends chunks on
    # characters' last bytes): at this rate a mode that ends every character is the character rule
    *_learned(
        "rl-group-mode-char-rate",
        "group-prior-mode",
        "rl-prior-only-group-mode-char-rate",
        boundaries={"target_rate": 0.336},
    ),
    *_learned(
        "rl-drop-mode-char-rate",
        "drop-prior-mode",
        "rl-prior-only-drop-mode-char-rate",
        boundaries={"target_rate": 0.336},
    ),
    # a head that reads the last 3 bytes (a byte string cut alike everywhere), taught by that prior:
    # if the teacher's chunk ends are mostly characters' last bytes, the head can learn all of them
    *_learned(
        "rl-byte-head-drop-char-rate",
        "byte-head",
        "rl-prior-only-byte-head-drop-char-rate",
        boundaries={"prior.cue": "entropy-drop", "target_rate": 0.336},
    ),
    # the same head taught by the next byte's entropy read the other way (a chunk ends before an easy
    # byte: its AUC for characters' last bytes is the highest of the cues, benchmarks/word_signal.py)
    *_learned(
        "rl-byte-head-ease-char-rate",
        "byte-head-ease",
        "rl-prior-only-byte-head-ease-char-rate",
        boundaries={"target_rate": 0.336},
    ),
    # from characters to words: the mode at character's rate for the first 96 steps, so the main
    # network learns whole units, then down to 0.2 by step 160, so the estimator chooses which
    # character edges to keep while the main network can tell them apart
    *_learned(
        "rl-group-mode-anneal",
        "group-prior-mode",
        "rl-prior-only-group-mode-anneal",
        boundaries={"policy.rate_from": 0.336, "policy.rate_hold": 96, "policy.rate_ramp": 64},
    ),
]
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
    if entry.recipe:
        recipe(entry.recipe).apply(cfg)
    for path, value in entry.boundaries.items():
        set_setting(cfg.boundaries, path, value)
    for path, value in entry.loss.items():
        set_setting(cfg.loss, path, value)
    cfg.train.seed = seed
    return cfg.validate()
