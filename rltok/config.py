"""Typed configs and named presets: one JSON-serialisable object describes a run."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from rltok.errors import UserError

SCHEMA_VERSION = 2


def flag(default: Any, name: str, help: str, **cli: Any) -> Any:
    """A field that `rltok train` sets with the flag `name`: rltok.cli builds its flags from these."""
    # the flag lives next to its field, so a field and its flag cannot drift apart; `cli` may hold
    # aliases, dest, metavar, choices, and positive=True for numbers that must be above 0
    return field(default=default, metadata={"flag": name, "help": help, **cli})


@dataclass
class ModelConfig:
    """Shape of the autoregressive byte U-Net."""

    d_model: int = 192
    n_heads: int = 3
    n_encoder: int = 2
    n_main: int = 4
    n_decoder: int = 2
    byte_mlp_mult: int = 1  # byte layers are cheap: they run at every byte
    main_mlp_mult: int = 4
    attention_window: int = 64  # sliding-window attention span of the byte layers, in bytes
    rope_base: float = 10000.0
    vocab_size: int = 257  # 256 byte values + BOS

    def check(self) -> None:
        """Raise UserError if the heads do not divide the width into even sizes."""
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise UserError(
                f"d_model {self.d_model} must split into {self.n_heads} heads of even size"
            )


@dataclass
class PolicyConfig:
    """The RL policy's head: what it reads, how its logits are shaped and held at the rate, how fast
    it learns, and which of its segmentations the language model trains on."""

    window: int = flag(  # the paper's w: how many past decisions shape the current logit
        1,
        "--policy-window",
        "the RL policy's w: past decisions that shape its logit (default 1; the paper's window)",
        aliases=("--window",),
        dest="window",
    )
    # what the head reads: the encoder's state at the byte (0, the paper's), or only the last N bytes,
    # so that a byte string is cut the same way wherever it occurs, as a rule cuts it
    context: int = flag(
        0,
        "--policy-context",
        "the RL policy decides from the last N bytes alone (a small network of their embeddings), "
        "so the same bytes are cut alike in every context (default 0: from the encoder's state)",
        metavar="N",
    )
    logit_scale: float = flag(  # paper: 1/16
        1.0, "--logit-scale", "policy logit = scale * raw + logit(rate) (paper: 1/16)"
    )
    softcap: float = 6.0
    lr_mult: float = flag(  # paper: 1
        30.0, "--policy-lr-mult", "learning-rate multiplier of the policy head"
    )
    # how the rate is held: "loss", the paper's rate loss on every logit (it also trains the head and
    # the encoder); or "calibrate", one shared offset of the logits set after each step so that the
    # mean probability hits the rate
    rate_control: str = flag(
        "loss",
        "--rate-control",
        "hold the RL rate with the paper's rate loss, or with one shared logit offset set after each "
        "step so that the mean probability hits the rate (calibrate) (default: the preset's)",
        choices=("loss", "calibrate"),
    )
    # the segmentation the language model trains on: one "sampled" from the policy (the paper's), or the
    # policy's "greedy" mode (a chunk ends where p > 0.5), which is consistent from text to text and so
    # one the network can rely on; the group estimator's rollouts still sample, scored against the mode
    lm_segmentation: str = flag(
        "sampled",
        "--lm-segmentation",
        "the segmentation the language model trains on: sampled from the policy, or its greedy mode "
        "(p > 0.5; the group estimator's rollouts still sample); evaluation follows it",
        choices=("sampled", "greedy"),
    )
    # the policy learns for the first N optimizer steps only, then its segmentation stays put, so the
    # language model trains the rest of the run on one segmentation, as on a rule
    steps: int = flag(
        0,
        "--policy-steps",
        "the boundary method learns over the first N optimizer steps only: its parameters' learning "
        "rate falls linearly to 0 over them, and the RL policy's calibrated rate offset and rollouts "
        "stop with them (default 0: every step)",
        metavar="N",
    )
    # a recipe's rate schedule (no flag): the policy aims at `rate_from` for the first `rate_hold`
    # optimizer steps, then moves linearly to the target rate over `rate_ramp` more; 0 = the target
    # rate throughout. A rate at which the policy's mode can end every character lets the main network
    # learn whole units before the policy has to choose which of their edges to keep
    rate_from: float = 0.0
    rate_hold: int = 0
    rate_ramp: int = 0

    def check(self, seq_len: int) -> None:
        """Raise UserError naming the first out-of-range setting of the head."""
        if not 1 <= self.window <= seq_len:
            raise UserError(
                f"--policy-window must be an integer from 1 to the sequence length {seq_len} "
                f"(got {self.window})"
            )
        if not 0 <= self.context <= 16:
            raise UserError(
                f"--policy-context must be 0 (the encoder's state) or 1 to 16 bytes (got {self.context})"
            )
        if self.steps < 0:
            raise UserError(
                f"--policy-steps must be 0 (every step) or a number of steps (got {self.steps})"
            )
        if not 0.0 <= self.rate_from < 1.0 or self.rate_hold < 0 or self.rate_ramp < 0:
            raise UserError(
                f"the rate schedule needs a starting rate in [0, 1) (0: none) and step counts of 0 or "
                f"more (got {self.rate_from}, {self.rate_hold}, {self.rate_ramp})"
            )
        if self.rate_control not in ("loss", "calibrate"):
            raise UserError(f"--rate-control must be loss or calibrate (got {self.rate_control!r})")


@dataclass
class EstimatorConfig:
    """The score-function estimator: the discount, the baselines and the price of a chunk end."""

    gamma: float = flag(  # paper: 0.99
        0.9,
        "--gamma",
        "discount per byte of the returns (default: the preset's, "
        "0.9 for CPU presets, 0.99 for paper presets)",
    )
    early_exit_reward: bool = flag(
        True, "--no-early-exit-reward", "reward without the early-exit baseline"
    )
    batch_relative: bool = flag(True, "--no-batch-relative", "no per-index centering of rewards")
    # a price per chunk end in the reward, set each step so that the score-function step leaves the
    # rate alone (a Lagrange multiplier): more chunks always lower the loss, and without the price the
    # head learns "more everywhere" while the calibrated offset pulls every logit back down
    rate_neutral: bool = flag(
        False,
        "--rate-neutral",
        "price every RL chunk end in the reward so that the policy's step leaves the boundary "
        "rate unchanged; the reward then ranks where chunks end, not how many (default: off)",
    )
    # under torchrun: centre batch-relative rewards over the global batch (all ranks), not per rank
    global_centering: bool = flag(
        False,
        "--global-centering",
        "under torchrun, centre the rewards over "
        "the global batch of every rank (default: each rank's micro-batch, as in the paper)",
    )

    def check(self) -> None:
        """Raise UserError if the discount is out of range."""
        if not 0.0 <= self.gamma <= 1.0:
            raise UserError(f"--gamma must lie in [0, 1] (got {self.gamma})")


@dataclass
class GroupConfig:
    """The group estimator (docs/method.md): K segmentations of each of `texts` texts per batch (0 = all),
    while the policy's mean entropy on the previous batch is above `entropy` bits."""

    size: int = flag(  # K; paper: 1
        4,
        "--group-size",
        "segment each grouped text K times and "
        "centre its rewards on the other K-1 (default: the preset's; 1 = the paper's estimator)",
        metavar="K",
    )
    texts: int = flag(
        4,
        "--group-texts",
        "texts per batch that are grouped (default: the preset's; 0 = all)",
        metavar="N",
    )
    entropy: float = flag(
        0.15,
        "--group-entropy",
        "group while the policy's mean "
        "entropy on the last batch is above this (default: the preset's; 0 = always)",
        metavar="BITS",
    )
    # the language model also trains on the extra segmentations (each text weighing as one row), so
    # the main network learns the policy's alternatives, not only the segmentation it happened to draw
    lm: bool = flag(
        False,
        "--group-lm",
        "the language model also trains on the group "
        "estimator's extra segmentations (default: the preset's)",
    )

    def check(self) -> None:
        """Raise UserError naming the first out-of-range setting of the group."""
        if self.size < 1 or self.texts < 0 or self.entropy < 0:
            raise UserError(
                f"--group-size must be at least 1, --group-texts and --group-entropy at least 0 "
                f"(got {self.size}, {self.texts}, {self.entropy})"
            )


PRIOR_CUES = ("entropy", "surprisal", "read-entropy", "entropy-drop")


@dataclass
class PriorConfig:
    """The surprisal prior: a cue of the early-exit head that starts the segmentation off the text's
    uncertainty (BLT's cue), added to the policy's logits or teaching its head."""

    # beta: adds beta x the early-exit head's standardised cue to every logit, so that the first chunks
    # already follow the text's uncertainty and the policy refines them; a negative beta ends chunks
    # where the cue is low (before an easy byte: on Chinese, characters' last bytes)
    weight: float = flag(  # paper: 0
        2.0,
        "--surprisal-prior",
        "add BETA x the early-exit head's standardised cue (--prior-cue) to the policy's logits; "
        "negative: chunks end where the cue is low (default: the preset's; 0 = the paper)",
        metavar="BETA",
    )
    # the cue: "entropy" of the next byte (a chunk ends before a hard byte), "surprisal" of the byte just
    # read (a chunk ends on a hard byte), "read-entropy", the entropy of the byte just read, or
    # "entropy-drop", that minus the next byte's (a chunk ends where a hard byte leaves an easy one:
    # a word's first letter in English, a character's last byte in Chinese)
    cue: str = flag(
        "entropy",
        "--prior-cue",
        "the prior's cue: the entropy of the next byte, the surprisal or the entropy of the byte just "
        "read, or the drop from that entropy to the next byte's (default: the preset's)",
        choices=PRIOR_CUES,
    )
    # "decide" adds beta x the cue to the logits; "teach" leaves the logits to the head and trains it
    # towards the prior's top-rate positions of each batch (a distillation loss)
    role: str = flag(
        "decide",
        "--prior-role",
        "the surprisal prior adds to the policy's logits (decide), or trains the head towards the "
        "batch's top --target-rate share of its cue and leaves the decision to the head (teach)",
        choices=("decide", "teach"),
    )
    # teach: the prior's chunk ends become targets of 1 - EPS and the other bytes of EPS x rate /
    # (1 - rate), so the head's logits settle inside the softcap's slope, where the estimator's gradient
    # still moves them (hard targets drive them into the cap), the targets keep the rate as their mean
    # (no tug of war with the calibrated offset), and a rollout drops as many chunk ends as it adds
    smoothing: float = flag(
        0.0,
        "--teach-smoothing",
        "with --prior-role teach: the prior's chunk ends train the head towards probability 1 - EPS "
        "and the other bytes towards EPS x rate / (1 - rate), which keeps the policy stochastic at "
        "the same mean rate (default 0: hard targets)",
        metavar="EPS",
    )

    def check(self) -> None:
        """Raise UserError naming the first setting of the prior that cannot be used as given."""
        if self.role == "teach" and not self.weight:
            raise UserError(
                "--prior-role teach trains the head towards the surprisal prior's chunk ends, but "
                "--surprisal-prior is 0: give it a nonzero BETA (only its sign matters then: "
                "positive, chunks end where the cue is high; negative, where it is low)"
            )
        if not 0.0 <= self.smoothing < 0.5:
            raise UserError(
                f"--teach-smoothing must lie in [0, 0.5): the probability taken off each of the "
                f"prior's chunk ends (got {self.smoothing})"
            )
        if self.smoothing and self.role != "teach":
            raise UserError(
                "--teach-smoothing softens the targets of --prior-role teach: add --prior-role teach, "
                "or drop it"
            )
        if self.role not in ("decide", "teach"):
            raise UserError(f"--prior-role must be decide or teach (got {self.role!r})")
        if self.cue not in PRIOR_CUES:
            raise UserError(
                f"--prior-cue must be one of {', '.join(PRIOR_CUES)} (got {self.cue!r})"
            )


@dataclass
class BoundaryConfig:
    """How token boundaries are drawn; `method` names an entry of rltok.boundaries.METHODS. The RL
    policy's settings come in four parts: its head, its estimator, the group estimator and the prior."""

    method: str = "rl"
    target_rate: float = flag(0.2, "--target-rate", "boundaries per byte to aim for (default 0.2)")
    # BPE guidance and the bpe-lm reference: tokens in the vocabulary, 0 = calibrate to target_rate
    bpe_vocab: int = flag(
        0, "--bpe-vocab", "BPE tokens for bpe and bpe-lm (default 0: calibrate to the target rate)"
    )
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    estimator: EstimatorConfig = field(default_factory=EstimatorConfig)
    group: GroupConfig = field(default_factory=GroupConfig)
    prior: PriorConfig = field(default_factory=PriorConfig)

    def check(self, seq_len: int) -> None:
        """Raise UserError naming the first out-of-range setting (sequences of `seq_len` bytes)."""
        if not 0.0 < self.target_rate < 1.0:
            raise UserError(
                f"--target-rate must lie strictly between 0 and 1 (got {self.target_rate})"
            )
        if self.bpe_vocab and not 256 < self.bpe_vocab <= 1 << 20:
            raise UserError(
                f"--bpe-vocab must be 0 (calibrate) or between 257 and {1 << 20} (got {self.bpe_vocab})"
            )
        self.policy.check(seq_len)
        self.estimator.check()
        self.group.check()
        self.prior.check()
        self._check_combined()

    def _check_combined(self) -> None:
        """The rules that span parts: the mode needs the group estimator, RL settings need rl."""
        if self.policy.lm_segmentation == "greedy" and (self.method != "rl" or self.group.size < 3):
            raise UserError(
                "--lm-segmentation greedy trains the language model on the RL policy's mode, which is "
                "no sample of it, so only the group estimator's rollouts, two or more per text, can "
                f"teach the policy: use --boundaries rl with --group-size 3 or more (got {self.method}, "
                f"{self.group.size})"
            )
        if self.estimator.rate_neutral and self.method != "rl":
            raise UserError(
                f"--rate-neutral prices the RL policy's chunk ends; {self.method} has none"
            )
        if self.estimator.global_centering and self.method != "rl":
            raise UserError(
                f"--global-centering centres the RL policy's rewards; {self.method} has none"
            )

    @classmethod
    def from_dict(cls, raw: dict) -> BoundaryConfig:
        """The boundaries section of a config.json, flat (before the RL settings were grouped) or
        grouped; missing settings take their defaults."""
        raw = dict(raw)
        for name, default in _REMOVED.items():
            if raw.pop(name, default) != default:
                raise UserError(
                    f"config.json sets {name}, a setting rltok removed after commit f17465c; retrain, or "
                    "use that commit to read this run"
                )
        if raw.get("rate_control") == "mode":
            raise UserError(
                "config.json sets rate_control mode, which rltok removed after commit f17465c; retrain, "
                "or use that commit to read this run"
            )
        parts: dict[str, dict] = {
            name: dict(raw.pop(name, {})) for name in ("policy", "estimator", "group", "prior")
        }
        for old, (part, name) in _GROUPED.items():
            if old in raw:
                parts[part][name] = raw.pop(old)
        return cls(
            **raw,
            policy=PolicyConfig(**parts["policy"]),
            estimator=EstimatorConfig(**parts["estimator"]),
            group=GroupConfig(**parts["group"]),
            prior=PriorConfig(**parts["prior"]),
        )


def set_setting(section: object, path: str, value: Any) -> None:
    """Set a setting of a config section by its dotted path ("group.size" of BoundaryConfig)."""
    *parts, name = path.split(".")
    for part in parts:
        section = getattr(section, part)
    if not hasattr(section, name):
        raise UserError(f"no setting {path!r} in {type(section).__name__}")
    setattr(section, name, value)


# where the flat fields of config.json files written before the RL settings were grouped now live
_GROUPED = {
    "window": ("policy", "window"),
    "policy_window": ("policy", "window"),
    "policy_context": ("policy", "context"),
    "logit_scale": ("policy", "logit_scale"),
    "softcap": ("policy", "softcap"),
    "policy_lr_mult": ("policy", "lr_mult"),
    "rate_control": ("policy", "rate_control"),
    "lm_segmentation": ("policy", "lm_segmentation"),
    "policy_steps": ("policy", "steps"),
    "gamma": ("estimator", "gamma"),
    "early_exit_reward": ("estimator", "early_exit_reward"),
    "batch_relative": ("estimator", "batch_relative"),
    "rate_neutral": ("estimator", "rate_neutral"),
    "global_centering": ("estimator", "global_centering"),
    "group_size": ("group", "size"),
    "group_texts": ("group", "texts"),
    "group_entropy": ("group", "entropy"),
    "group_lm": ("group", "lm"),
    "surprisal_prior": ("prior", "weight"),
    "prior_cue": ("prior", "cue"),
    "prior_role": ("prior", "role"),
    "teach_smoothing": ("prior", "smoothing"),
}
# settings of variants that were measured, lost and left the code after commit f17465c (their records
# are in docs/results/learner-notes.md): a config.json that used one cannot be rebuilt by this rltok
_REMOVED = {"prior_fade": 0, "rate_warmup": 0, "rate_start": 0.8}


@dataclass
class LossWeights:
    """Weights of the four terms of the training objective (docs/method.md)."""

    lm: float = flag(0.9, "--lm-weight", "weight of the lm loss term")
    early: float = flag(0.1, "--early-weight", "weight of the early loss term")
    # the paper's 0.01: Adam makes the policy head's steps independent of these weights, while larger
    # ones only add the estimator's noise to the encoder's gradient (0.1 cost 0.04-0.07 bits per byte)
    policy: float = flag(0.01, "--policy-weight", "weight of the policy loss term")
    # kept equal to the policy weight, as in the paper
    rate: float = flag(0.01, "--rate-weight", "weight of the rate loss term")
    # H-Net's ratio loss; paper: 0.03, too weak to reach the rate in a CPU budget
    ratio: float = flag(1.0, "--ratio-weight", "weight of the ratio loss term")
    # Nawrot's binomial prior on the boundary count
    prior: float = flag(1.0, "--prior-weight", "weight of the prior loss term")
    # --prior-role teach: the head's loss towards the prior's chunk ends, on the policy loss's scale
    teach: float = flag(0.01, "--teach-weight", "weight of the teach loss term")

    def check(self) -> None:
        """Raise UserError if a weight is negative."""
        if any(w < 0 for w in dataclasses.astuple(self)):
            raise UserError("loss weights must be non-negative")


@dataclass
class TrainConfig:
    """Optimisation and bookkeeping."""

    seq_len: int = flag(512, "--seq-len", "bytes per sequence, BOS included", positive=True)
    # rows per optimizer step, over all ranks and accumulation steps
    batch_size: int = flag(16, "--batch-size", "sequences per step", positive=True)
    # micro-batches per rank per step: a rank runs batch_size / (ranks x grad_accum) rows at once
    grad_accum: int = flag(
        1,
        "--grad-accum",
        "micro-batches per process and step "
        "(default 1); --batch-size stays the rows of a whole step over every process",
        metavar="N",
        positive=True,
    )
    max_steps: int = flag(
        600, "--max-steps", "optimizer steps (default: the preset's)", positive=True
    )
    lr: float = flag(3e-3, "--lr", "peak learning rate", positive=True)
    min_lr_frac: float = 0.0  # cosine decays to this fraction of the peak
    warmup_steps: int = flag(
        30,
        "--warmup-steps",
        "steps of linear learning-rate warm-up (default: the preset's)",
        metavar="N",
    )
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    precision: str = flag(
        "auto", "--precision", "autocast precision", choices=("auto", "bf16", "fp32")
    )
    eval_every: int = flag(100, "--eval-every", "steps between validation runs", positive=True)
    eval_bytes: int = 65536  # validation bytes scored at each periodic evaluation
    log_every: int = 10
    # steps between checkpoints, so a crash loses at most this much ...
    checkpoint_every: int = flag(
        100,
        "--checkpoint-every",
        "save a checkpoint every this many steps (default: the preset's)",
        metavar="STEPS",
        positive=True,
    )
    # ... or this much time, whichever comes first
    checkpoint_minutes: float = flag(
        10.0,
        "--checkpoint-minutes",
        "... or every this many minutes, whichever comes first (default 10)",
        metavar="MINUTES",
        positive=True,
    )
    # the newest K are kept, so a damaged one has a fallback
    keep_checkpoints: int = flag(
        3, "--keep-checkpoints", "keep the newest K (default 3)", metavar="K", positive=True
    )
    max_nonfinite_steps: int = (
        10  # consecutive skipped steps (NaN/inf loss or gradient) before stopping
    )
    seed: int = flag(0, "--seed", "seed for weights, data order and boundary sampling")

    def check(self) -> None:
        """Raise UserError naming the first out-of-range setting."""
        if self.grad_accum < 1 or self.batch_size % self.grad_accum:
            raise UserError(
                f"--grad-accum must be at least 1 and divide --batch-size {self.batch_size} "
                f"(got {self.grad_accum})"
            )
        if self.seq_len < 2 or self.batch_size < 1:
            raise UserError("--seq-len must be at least 2 and --batch-size at least 1")
        if (
            self.checkpoint_every < 1
            or not self.checkpoint_minutes > 0
            or self.keep_checkpoints < 1
        ):
            raise UserError(
                "--checkpoint-every, --checkpoint-minutes and --keep-checkpoints must be positive"
            )
        if self.warmup_steps < 0:
            raise UserError(
                f"--warmup-steps must be 0 (none) or a number of steps (got {self.warmup_steps})"
            )
        if self.precision not in ("auto", "bf16", "fp32"):
            raise UserError(f"--precision must be auto, bf16 or fp32 (got {self.precision!r})")


# fields renamed since the schema's version 1 was first written: such config.json files load as is
_RENAMED = {"window": "attention_window"}


@dataclass
class Config:
    """Everything that defines a run; saved as config.json next to every checkpoint."""

    preset: str = "tiny"
    model: ModelConfig = field(default_factory=ModelConfig)
    boundaries: BoundaryConfig = field(default_factory=BoundaryConfig)
    loss: LossWeights = field(default_factory=LossWeights)
    train: TrainConfig = field(default_factory=TrainConfig)
    version: int = SCHEMA_VERSION

    @property
    def reads_bpe(self) -> bool:
        """Whether the run reads a byte-level BPE (BPE guidance, the BPE-token model), which training
        fits on the training split before the model is built (its vocabulary sizes the model)."""
        return self.boundaries.method in ("bpe", "bpe-lm")

    @property
    def reads_gold(self) -> bool:
        """Whether the run's chunks are its corpus's gold word boundaries (the gold oracle)."""
        return self.boundaries.method in ("gold", "gold-end")

    def to_json(self) -> str:
        """Serialise to indented JSON."""
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_dict(cls, raw: dict) -> Config:
        """Rebuild a Config from `to_json` output, rejecting unknown or missing sections."""
        if raw.get("version") != SCHEMA_VERSION:
            raise UserError(
                f"config version {raw.get('version')} is not supported by this rltok "
                f"(expects {SCHEMA_VERSION}); retrain or use the rltok release that wrote it"
            )
        try:
            train = dict(raw["train"])
            train["betas"] = tuple(train["betas"])
            return cls(
                preset=raw["preset"],
                model=ModelConfig(**{_RENAMED.get(k, k): v for k, v in raw["model"].items()}),
                boundaries=BoundaryConfig.from_dict(raw["boundaries"]),
                loss=LossWeights(**raw["loss"]),
                train=TrainConfig(**train),
                version=raw["version"],
            )
        except (KeyError, TypeError) as e:
            raise UserError(
                f"config.json does not match this rltok's config schema ({e}); "
                "it was written by another version"
            ) from None

    def check_given(self, given: set[str]) -> None:
        """One sentence for an RL setting given on the command line (`given`: the fields set by flags)
        that this run cannot use as asked."""
        b, group, t = self.boundaries, self.boundaries.group, self.train
        if "group.size" in given and group.size != 1 and b.method != "rl":
            raise UserError(
                f"--group-size {group.size} needs --boundaries rl (the group estimator trains the "
                f"RL policy; {b.method} has none)"
            )
        if "group.texts" in given and group.texts > t.batch_size:
            raise UserError(
                f"--group-texts {group.texts} exceeds the {t.batch_size} texts of a batch; pass at "
                "most --batch-size, or 0 for all of them"
            )

    def validate(self) -> Config:
        """Raise UserError naming the first out-of-range setting; each section checks its own."""
        self.boundaries.check(self.train.seq_len)
        self.model.check()
        self.train.check()
        self.loss.check()
        return self


def _paper(d: int, heads: int, enc: int, main: int, dec: int) -> Config:
    """A paper-scale preset: the paper's policy scaling and loss weights, 4096-byte sequences."""
    return Config(
        model=ModelConfig(d_model=d, n_heads=heads, n_encoder=enc, n_main=main, n_decoder=dec),
        boundaries=BoundaryConfig(
            policy=PolicyConfig(logit_scale=1 / 16, lr_mult=1.0),
            estimator=EstimatorConfig(gamma=0.99),
            group=GroupConfig(size=1, texts=0),
            prior=PriorConfig(weight=0.0),
        ),
        loss=LossWeights(ratio=0.03),
        train=TrainConfig(
            seq_len=4096,
            batch_size=128,
            max_steps=11_444,
            lr=1.5e-3,
            warmup_steps=858,
            eval_every=500,
            eval_bytes=1 << 20,
        ),
    )


PRESETS: dict[str, Config] = {
    # 20 steps in seconds: tests and quick checks
    "smoke": Config(
        model=ModelConfig(d_model=64, n_heads=2, n_encoder=1, n_main=1, n_decoder=1),
        train=TrainConfig(
            seq_len=128,
            batch_size=4,
            max_steps=20,
            warmup_steps=2,
            eval_every=10,
            eval_bytes=4096,
            log_every=5,
            checkpoint_every=10,
        ),
    ),
    # the default: about 3.5M parameters, the 10-minute CPU demo
    "tiny": Config(),
    # a step up for a GPU or a patient CPU
    "small": Config(
        model=ModelConfig(d_model=384, n_heads=6, n_encoder=2, n_main=6, n_decoder=2),
        train=TrainConfig(
            seq_len=1024,
            batch_size=32,
            max_steps=5000,
            lr=2e-3,
            warmup_steps=200,
            eval_every=250,
            eval_bytes=1 << 18,
        ),
    ),
    "paper-40m": _paper(512, 8, 4, 6, 4),
    "paper-90m": _paper(768, 12, 4, 6, 4),
    "paper-147m": _paper(768, 12, 4, 12, 4),
}


def preset(name: str) -> Config:
    """A fresh copy of a named preset."""
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    cfg = Config.from_dict(json.loads(PRESETS[name].to_json()))
    cfg.preset = name
    return cfg
