"""One training loop for every boundary method: AdamW, warm-up then cosine, clipping, bf16 autocast,
JSON-lines metrics, periodic validation, atomic checkpoints, and Ctrl-C / SIGTERM that save and stop."""

from __future__ import annotations

import json
import math
import shutil
import signal
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from rltok.bpe import ByteBPE, StoredBPE, fit_bpe
from rltok.checkpoint import latest, load_state, load_weights, save_checkpoint, set_aside_checkpoints
from rltok.config import Config
from rltok.data import Corpus, TrainStream
from rltok.errors import UserError
from rltok.evaluate import evaluate
from rltok.model import BPE_METHODS, build_model
from rltok.objective import run_model, training_loss
from rltok.runlock import run_lock
from rltok.runtime import autocast, default_device


def lr_factor(step: int, progress: float, cfg: Config) -> float:
    """Linear warm-up from 0.1x over warmup_steps, times a cosine over the run's progress in [0, 1]."""
    t = cfg.train
    warm = min(1.0, 0.1 + 0.9 * step / t.warmup_steps) if t.warmup_steps > 0 else 1.0
    cosine = t.min_lr_frac + (1 - t.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return warm * cosine


def set_learning_rate(optimizer: torch.optim.Optimizer, cfg: Config, factor: float = 1.0) -> None:
    """The peak learning rate times the schedule's factor and each group's multiplier."""
    for group in optimizer.param_groups:
        group["lr"] = cfg.train.lr * factor * group["lr_mult"]


def make_optimizer(model: nn.Module, cfg: Config) -> torch.optim.AdamW:
    """AdamW with three groups: decayed matrices, undecayed vectors and embeddings, and the boundary
    method's parameters at their own learning-rate multiplier."""
    method = getattr(model, "boundary", None)
    boundary = set(id(p) for p in method.parameters()) if method is not None else set()
    groups = {"decay": [], "no_decay": [], "boundary": []}
    for name, p in model.named_parameters():
        if id(p) in boundary:
            groups["boundary"].append(p)
        elif p.dim() >= 2 and "embed" not in name:
            groups["decay"].append(p)
        else:
            groups["no_decay"].append(p)
    t = cfg.train
    param_groups = [
        {"params": groups["decay"], "weight_decay": t.weight_decay, "lr_mult": 1.0},
        {"params": groups["no_decay"], "weight_decay": 0.0, "lr_mult": 1.0},
        {"params": groups["boundary"], "weight_decay": 0.0, "lr_mult": getattr(method, "lr_mult", 1.0)},
    ]
    return torch.optim.AdamW([g for g in param_groups if g["params"]], lr=t.lr, betas=t.betas)


def fit_tokenizer(cfg: Config, docs: list[bytes], run_dir: Path) -> ByteBPE | None:
    """For methods that read BPE tokens: train the BPE on the training split, record its size in the
    config, and keep a readable copy as RUN/bpe.json."""
    b = cfg.boundaries
    if b.method not in BPE_METHODS:
        return None
    bpe = fit_bpe(docs, b.target_rate, b.bpe_vocab)
    b.bpe_vocab = bpe.vocab_size
    (run_dir / "bpe.json").write_bytes(bpe.to_bytes())
    print(f"rltok: trained a byte-level BPE of {bpe.vocab_size} tokens on the training split", file=sys.stderr)
    return bpe


def group_rollouts(cfg: Config, policy_entropy: float, device: torch.device) -> torch.Tensor | None:
    """Rows of the batch to segment again for the group estimator: K - 1 more of each grouped text,
    while the policy is still uncertain (its entropy on the last batch above cfg's threshold)."""
    b = cfg.boundaries
    if b.method != "rl" or b.group_size == 1 or policy_entropy <= b.group_entropy:
        return None
    texts = min(b.group_texts or cfg.train.batch_size, cfg.train.batch_size)
    return torch.arange(texts, device=device).repeat_interleave(b.group_size - 1)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
               targets: torch.Tensor, cfg: Config,
               rollouts: torch.Tensor | None = None) -> tuple[torch.Tensor, dict, torch.Tensor, str | None]:
    """One optimizer step on a full (unpadded) batch, `rollouts` naming rows to segment again; returns
    the loss, its parts, the gradient norm and, when the step was skipped because something was not
    finite, the name of the culprit."""
    valid = torch.ones_like(targets, dtype=torch.bool)
    with autocast(inputs.device, cfg.train.precision):
        out, nll = run_model(model, inputs, targets, valid, rollouts=rollouts)
    loss, parts = training_loss(model, out, nll, targets, valid, cfg.loss)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip)
    culprit = None
    if not bool(torch.isfinite(loss) & torch.isfinite(grad_norm)):  # one host sync per step
        culprit = next((f"{k[5:]} loss" for k, v in parts.items() if k.startswith("loss_")
                        and not torch.isfinite(v)), "gradient")
        optimizer.zero_grad(set_to_none=True)
    else:
        optimizer.step()
    return loss.detach(), parts, grad_norm, culprit


class StopFlag:
    """Turns SIGINT/SIGTERM into a request to save and stop after the current step (a second
    Ctrl-C interrupts at once)."""

    def __init__(self):
        self.signal: int | None = None

    @contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def handle(signum, frame):
            if self.signal is not None and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.signal = signum

        for s in previous:
            signal.signal(s, handle)
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def _log(path: Path, record: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop records logged after the checkpoint a run resumes from: they will be logged again."""
    if path.exists():
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        kept = [line for line in lines if json.loads(line).get("step", 0) <= step]
        if len(kept) < len(lines):
            tmp = path.with_suffix(".tmp")
            tmp.write_text("".join(line + "\n" for line in kept))
            tmp.replace(path)


def train(cfg: Config, corpus: Corpus, run_dir: str | Path, resume: bool = False,
          time_limit: float | None = None, device: str | torch.device | None = None,
          progress: bool | None = None) -> dict:
    """Train until cfg.train.max_steps (or time_limit seconds); return the final summary."""
    cfg.validate()
    run_dir = Path(run_dir)
    if resume and not (run_dir / "config.json").exists():
        raise UserError(f"{run_dir} holds no run to resume; drop --resume to start a fresh run")
    fresh = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        with run_lock(run_dir):
            return _train_locked(cfg, corpus, run_dir, resume, time_limit, device, progress)
    except BaseException:
        if fresh and not (run_dir / "config.json").exists():  # failed before it began: leave nothing behind
            shutil.rmtree(run_dir, ignore_errors=True)
        raise


def _train_locked(cfg: Config, corpus: Corpus, run_dir: Path, resume: bool, time_limit: float | None,
                  device: str | torch.device | None, progress: bool | None) -> dict:
    t = cfg.train
    device = torch.device(device) if device is not None else default_device()
    if not resume and (run_dir / "config.json").exists():
        raise UserError(f"{run_dir} already holds a run; pass --resume to continue it or choose another --out")
    checkpoint = latest(run_dir, set_aside=True) if resume else None
    if resume and checkpoint is None:
        if set_aside_checkpoints(run_dir):
            raise UserError(f"every checkpoint in {run_dir} is damaged (set aside as *.damaged); delete the "
                            "directory or choose another --out to start afresh")
        # killed before its first checkpoint: nothing to lose, start again
        warnings.warn(f"{run_dir} holds no checkpoint yet (the run stopped before its first one); "
                      "starting it again from step 0")
        _truncate_metrics(run_dir / "metrics.jsonl", 0)
    bpe = None if checkpoint else fit_tokenizer(cfg, corpus.train, run_dir)
    torch.manual_seed(t.seed)
    model = build_model(cfg).to(device)
    if bpe is not None:
        for module in model.modules():
            if isinstance(module, StoredBPE):
                module.store(bpe)
    optimizer = make_optimizer(model, cfg)
    stream = TrainStream(corpus.train, t.seq_len, t.batch_size, seed=t.seed)
    metrics_path = run_dir / "metrics.jsonl"
    step, elapsed = 0, 0.0
    policy_entropy = math.inf  # of the last batch: the group estimator runs while it is high
    if checkpoint is not None:
        state = load_state(checkpoint)
        if state["corpus"] != corpus.describe():
            raise UserError(f"the checkpoint was trained on [{state['corpus']}] but --data gives "
                            f"[{corpus.describe()}]; resume with the same --data")
        load_weights(model, checkpoint)
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        stream.generator.set_state(state["stream_rng"])
        step, elapsed = state["step"], state["elapsed"]
        policy_entropy = state.get("policy_entropy", math.inf)
        _truncate_metrics(metrics_path, step)
    (run_dir / "config.json").write_text(cfg.to_json())
    bytes_per_step = t.batch_size * t.seq_len

    def progress_of(step: int, elapsed: float) -> float:
        done = step / t.max_steps
        return max(done, elapsed / time_limit) if time_limit else done

    def save() -> Path:
        state = {"step": step, "elapsed": elapsed, "optimizer": optimizer.state_dict(),
                 "torch_rng": torch.get_rng_state(), "stream_rng": stream.generator.get_state(),
                 "corpus": corpus.describe(), "policy_entropy": policy_entropy}
        return save_checkpoint(run_dir, model, cfg, state, keep=t.keep_checkpoints)

    def validate() -> dict:
        scores = evaluate(model, corpus.val, t.seq_len, t.batch_size, max_bytes=t.eval_bytes,
                          precision=t.precision)
        record = {"step": step, "bytes": step * bytes_per_step, "elapsed": round(elapsed, 2),
                  **{f"val_{k}": v for k, v in scores.items()}}
        _log(metrics_path, record)
        return record

    show = sys.stderr.isatty() if progress is None else progress
    bar = tqdm(total=t.max_steps, initial=step, disable=not show, unit="step", dynamic_ncols=True)
    stop = StopFlag()
    model.train()
    started = time.perf_counter() - elapsed
    last_val: dict = {}
    last_save, bad_steps = elapsed, []
    with stop.installed():
        while step < t.max_steps and progress_of(step, elapsed) < 1.0 and stop.signal is None:
            factor = lr_factor(step, progress_of(step, elapsed), cfg)
            set_learning_rate(optimizer, cfg, factor)
            inputs, targets = (x.to(device) for x in stream.next_batch())
            rollouts = group_rollouts(cfg, policy_entropy, device)
            loss, parts, grad_norm, culprit = train_step(model, optimizer, inputs, targets, cfg, rollouts)
            if "policy_entropy" in parts and cfg.boundaries.group_size > 1:
                parts["rollouts"] = torch.tensor(0 if rollouts is None else len(rollouts))
                if culprit is None:
                    policy_entropy = float(parts["policy_entropy"])
            step += 1
            elapsed = time.perf_counter() - started

            if culprit is not None:
                bad_steps.append(step)
                _log(metrics_path, {"step": step, "skipped": culprit})
                print(f"step {step}: non-finite {culprit}; step skipped", file=sys.stderr)
                if len(bad_steps) >= t.max_nonfinite_steps:
                    path = save()
                    raise UserError(f"{len(bad_steps)} consecutive steps ({bad_steps[0]}-{step}) had a non-finite "
                                    f"{culprit}; the last good weights are saved in {path}; lower --lr or "
                                    "check the data, then continue with --resume")
            else:
                bad_steps = []
            if step % t.log_every == 0 or step == t.max_steps:
                record = {"step": step, "bytes": step * bytes_per_step, "elapsed": round(elapsed, 2),
                          "bytes_per_s": round(step * bytes_per_step / max(elapsed, 1e-9)),
                          "lr": t.lr * factor, "loss": float(loss), "grad_norm": float(grad_norm),
                          **{k: float(v) for k, v in parts.items()}}
                _log(metrics_path, record)
                bar.set_postfix(loss=f"{record['loss_lm']:.3f}", rate=f"{record.get('boundary_rate', 1.0):.3f}",
                                bytes_s=f"{record['bytes_per_s']:,}")
            if step % t.eval_every == 0:
                last_val = validate()
                if not show:
                    print(f"step {step}/{t.max_steps}  val bpb {last_val['val_bpb']:.4f}  "
                          f"rate {last_val.get('val_rate', 1.0):.3f}  {elapsed:.0f}s", file=sys.stderr)
            due = step % t.checkpoint_every == 0 or elapsed - last_save >= 60 * t.checkpoint_minutes
            if due and step < t.max_steps:
                try:
                    save()
                except UserError as e:  # a full disk need not end the run: the next save may succeed
                    warnings.warn(str(e))
                last_save = elapsed
            bar.update(1)
    bar.close()

    path = save()
    if stop.signal is not None:
        name = signal.Signals(stop.signal).name
        print(f"{name} at step {step}: checkpoint saved to {path}; continue with --resume", file=sys.stderr)
        return {"interrupted": True, "step": step, "checkpoint": str(path)}
    if last_val.get("step") != step:
        last_val = validate()
    summary = {"interrupted": False, "step": step, "bytes": step * bytes_per_step, "elapsed": elapsed,
               "bytes_per_s": step * bytes_per_step / max(elapsed, 1e-9), "checkpoint": str(path),
               "parameters": sum(p.numel() for p in model.parameters()), **last_val}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
