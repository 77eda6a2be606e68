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
from rltok.checkpoint import (
    latest,
    load_state,
    save_checkpoint,
    set_aside_checkpoints,
)
from rltok.config import Config
from rltok.data import Corpus, TrainStream
from rltok.errors import UserError
from rltok.evaluate import evaluate
from rltok.flops import flops_per_byte, peak_flops
from rltok.layers.blocks import Block
from rltok.model import BPE_METHODS
from rltok.objective import run_model, training_loss
from rltok.parallel import Parallel, PeerFailure
from rltok.pretrained import build_model, load_weights
from rltok.runlock import run_lock
from rltok.runtime import autocast, default_device


def lr_factor(step: int, progress: float, cfg: Config) -> float:
    """Linear warm-up from 0.1x over warmup_steps, times a cosine over the run's progress in [0, 1]."""
    t = cfg.train
    warm = min(1.0, 0.1 + 0.9 * step / t.warmup_steps) if t.warmup_steps > 0 else 1.0
    cosine = t.min_lr_frac + (1 - t.min_lr_frac) * 0.5 * (
        1 + math.cos(math.pi * min(progress, 1.0))
    )
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
        {
            "params": groups["boundary"],
            "weight_decay": 0.0,
            "lr_mult": getattr(method, "lr_mult", 1.0),
        },
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
    print(
        f"rltok: trained a byte-level BPE of {bpe.vocab_size} tokens on the training split",
        file=sys.stderr,
    )
    return bpe


def micro_batch_seed(seed: int, step: int, index: int) -> int:
    """The seed of the boundary sampling of micro-batch `index` (over all ranks) of a step: a function of
    the step alone, so a resumed run, and any split of the batch over ranks, draws the same noise."""
    return hash((seed, step, index)) & 0xFFFF_FFFF_FFFF


def my_micro_batches(
    inputs: torch.Tensor, targets: torch.Tensor, par: Parallel, accum: int
) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """This rank's accumulation steps, as (index over all ranks, inputs, targets): consecutive slices of
    the global batch, rank 0 first, so 2 ranks x 1 step see what 1 rank x 2 steps sees."""
    size = len(inputs) // (par.world * accum)
    first = par.rank * accum
    return [
        (i, inputs[i * size : (i + 1) * size], targets[i * size : (i + 1) * size])
        for i in range(first, first + accum)
    ]


def accumulate_gradients(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: list,
    cfg: Config,
    par: Parallel,
    step: int,
) -> tuple[torch.Tensor, dict, torch.Tensor]:
    """Forward and backward over this rank's micro-batches (gradients summed, synced across ranks on
    the last), then clipping; returns the mean loss, its mean parts and the (global) gradient norm.
    The optimizer step is `finish_step`'s, once every rank's loss is known to be finite."""
    optimizer.zero_grad(set_to_none=True)
    boundary = getattr(model, "boundary", None)  # the reference models (flat, bpe-lm) have none
    n = len(micro_batches)
    total, parts = 0.0, {}
    for a, (index, inputs, targets) in enumerate(micro_batches):
        torch.manual_seed(micro_batch_seed(cfg.train.seed, step, index))
        valid = torch.ones_like(targets, dtype=torch.bool)
        rows = len(inputs)
        rollouts = (
            boundary.rollouts(rows, cfg.train.batch_size, inputs.device) if boundary else None
        )
        with par.gradient_sync(model, enabled=a == n - 1):
            with autocast(inputs.device, cfg.train.precision):
                out, nll = run_model(
                    model,
                    inputs,
                    targets,
                    valid,
                    rollouts=rollouts,
                    learn_rollouts=cfg.boundaries.group_lm,
                )
            loss, micro_parts = training_loss(model, out, nll, targets, valid, cfg.loss)
            (loss / n).backward()
        # kept on the device: the caller syncs once per step
        total = total + loss.detach().float() / n
        for k, v in micro_parts.items():
            parts[k] = parts.get(k, 0.0) + v.detach().float() / n
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip)
    if hasattr(grad_norm, "full_tensor"):  # a DTensor under FSDP2: the norm over every shard
        grad_norm = grad_norm.full_tensor()
    return total, parts, grad_norm.detach().float()


def finish_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    parts: dict,
    grad_norm: torch.Tensor,
) -> str | None:
    """Step the optimizer and hand the step's statistics to the boundary method, or skip the step when
    the loss or the gradient is not finite and return the name of the culprit."""
    if bool(torch.isfinite(loss) & torch.isfinite(grad_norm)):
        optimizer.step()
        if hasattr(model, "boundary"):
            model.boundary.end_step(parts)
        return None
    optimizer.zero_grad(set_to_none=True)
    return next(
        (
            f"{k[5:]} loss"
            for k, v in parts.items()
            if k.startswith("loss_") and not torch.isfinite(v)
        ),
        "gradient",
    )


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    cfg: Config,
    step: int = 0,
) -> tuple[torch.Tensor, dict, torch.Tensor, str | None]:
    """One optimizer step of one process on a full batch; returns the loss, its parts, the gradient
    norm and the culprit of a skipped step."""
    loss, parts, grad_norm = accumulate_gradients(
        model, optimizer, [(0, inputs, targets)], cfg, Parallel(), step
    )
    return loss, parts, grad_norm, finish_step(model, optimizer, loss, parts, grad_norm)


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


def _is_collective_failure(error: BaseException) -> bool:
    """True for the error a rank meets when another rank of the run has died mid-collective."""
    import torch.distributed as dist

    return isinstance(error, dist.DistError) or (
        isinstance(error, RuntimeError) and "gloo" in str(error)
    )


def train(
    cfg: Config,
    corpus: Corpus,
    run_dir: str | Path,
    resume: bool = False,
    time_limit: float | None = None,
    device: str | torch.device | None = None,
    progress: bool | None = None,
    fsdp: bool = False,
    compile: bool = False,
) -> dict:
    """Train until cfg.train.max_steps (or time_limit seconds); return the final summary. Launched by
    torchrun, every process trains its share of each batch with DDP (or FSDP2 with `fsdp`) and rank 0
    alone writes the run directory; `compile` compiles each transformer block with torch.compile."""
    cfg.validate()
    run_dir = Path(run_dir)
    par, device = Parallel.start(
        torch.device(device) if device is not None else default_device(), fsdp
    )
    peer_failed = False
    try:
        if not par.main:
            return _train_locked(
                cfg, corpus, run_dir, resume, time_limit, device, progress, par, compile
            )
        if resume and not (run_dir / "config.json").exists():
            raise UserError(f"{run_dir} holds no run to resume; drop --resume to start a fresh run")
        fresh = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)
        try:
            with run_lock(run_dir):
                return _train_locked(
                    cfg, corpus, run_dir, resume, time_limit, device, progress, par, compile
                )
        except BaseException:
            # failed before it began: leave nothing behind
            if fresh and not (run_dir / "config.json").exists():
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
    except Exception as e:
        if par.world > 1 and _is_collective_failure(e):
            peer_failed = True
            found = latest(run_dir) if run_dir.exists() else None
            raise PeerFailure(
                f"another process of this {par.world}-process run stopped (its own message says "
                f"why); the newest complete checkpoint is {found or 'not written yet'}; fix the "
                "cause and relaunch with --resume"
            ) from None
        raise
    finally:
        par.stop(peer_failed)


def _start_checkpoint(run_dir: Path, resume: bool, par: Parallel) -> Path | None:
    """Rank 0 finds the checkpoint to resume from (setting damaged ones aside) and tells the others."""
    found = None
    if par.main:
        if not resume and (run_dir / "config.json").exists():
            raise UserError(
                f"{run_dir} already holds a run; pass --resume to continue it or choose another --out"
            )
        found = latest(run_dir, set_aside=True) if resume else None
        if resume and found is None:
            if set_aside_checkpoints(run_dir):
                raise UserError(
                    f"every checkpoint in {run_dir} is damaged (set aside as *.damaged); delete the "
                    "directory or choose another --out to start afresh"
                )
            # killed before its first checkpoint: nothing to lose, start again
            warnings.warn(
                f"{run_dir} holds no checkpoint yet (the run stopped before its first one); "
                "starting it again from step 0"
            )
            _truncate_metrics(run_dir / "metrics.jsonl", 0)
    found = par.broadcast(None if found is None else str(found))
    return None if found is None else Path(found)


def _train_locked(
    cfg: Config,
    corpus: Corpus,
    run_dir: Path,
    resume: bool,
    time_limit: float | None,
    device: torch.device,
    progress: bool | None,
    par: Parallel,
    compile: bool,
) -> dict:
    t = cfg.train
    if t.batch_size % (par.world * t.grad_accum):
        raise UserError(
            f"--batch-size {t.batch_size} does not split into {par.world} processes x --grad-accum "
            f"{t.grad_accum} equal micro-batches; make it a multiple of {par.world * t.grad_accum}"
        )
    checkpoint = _start_checkpoint(run_dir, resume, par)
    bpe = (
        None
        if checkpoint
        else par.broadcast(fit_tokenizer(cfg, corpus.train, run_dir) if par.main else None)
    )
    if bpe is not None:
        cfg.boundaries.bpe_vocab = bpe.vocab_size
    torch.manual_seed(t.seed)
    model = build_model(cfg)
    if bpe is not None:
        for module in model.modules():
            if isinstance(module, StoredBPE):
                module.store(bpe)
    stream = TrainStream(corpus.train, t.seq_len, t.batch_size, seed=t.seed)
    metrics_path = run_dir / "metrics.jsonl"
    step, elapsed = 0, 0.0
    boundary = getattr(model, "boundary", None)  # the reference models (flat, bpe-lm) have none
    state = None
    if checkpoint is not None:
        state = load_state(checkpoint)
        if state["corpus"] != corpus.describe():
            raise UserError(
                f"the checkpoint was trained on [{state['corpus']}] but --data gives "
                f"[{corpus.describe()}]; resume with the same --data"
            )
        load_weights(model, checkpoint)
        stream.generator.set_state(state["stream_rng"])
        step, elapsed = state["step"], state["elapsed"]
        if boundary is not None:
            boundary.restore_state(state)
    flops = flops_per_byte(model, cfg.boundaries.target_rate, t.seq_len)
    peak = peak_flops(device)
    if compile:  # block by block: the main network's chunk count varies, so its shapes are dynamic
        for module in model.modules():
            if isinstance(module, Block):
                module.compile(dynamic=True)
    model = par.wrap(model.to(device), device)
    if boundary is not None:
        boundary.share_across(par.sum)
    optimizer = make_optimizer(model, cfg)
    if state is not None:
        par.load_optimizer_state(model, optimizer, state["optimizer"])
    if par.main:
        if state is not None:
            _truncate_metrics(metrics_path, step)
        (run_dir / "config.json").write_text(cfg.to_json())
    bytes_per_step = t.batch_size * t.seq_len

    def progress_of(step: int, elapsed: float) -> float:
        done = step / t.max_steps
        return max(done, elapsed / time_limit) if time_limit else done

    def save() -> Path | None:
        weights, optimizer_state = (
            par.full_weights(model),
            par.full_optimizer_state(model, optimizer),
        )
        if not par.main:
            return None
        state = {
            "step": step,
            "elapsed": elapsed,
            "optimizer": optimizer_state,
            "stream_rng": stream.generator.get_state(),
            "corpus": corpus.describe(),
            **(boundary.carried_state() if boundary is not None else {}),
        }
        return save_checkpoint(run_dir, weights, cfg, state, keep=t.keep_checkpoints)

    def validate() -> dict:
        scores = evaluate(
            model,
            corpus.val,
            t.seq_len,
            t.batch_size,
            max_bytes=t.eval_bytes,
            precision=t.precision,
            part=(par.rank, par.world),
            sum_across=par.sum,
        )
        record = {
            "step": step,
            "bytes": step * bytes_per_step,
            "elapsed": round(elapsed, 2),
            **{f"val_{k}": v for k, v in scores.items()},
        }
        if par.main:
            _log(metrics_path, record)
        return record

    show = par.main and (sys.stderr.isatty() if progress is None else progress)
    bar = tqdm(total=t.max_steps, initial=step, disable=not show, unit="step", dynamic_ncols=True)
    stop = StopFlag()
    model.train()
    started = time.perf_counter() - elapsed
    last_val: dict = {}
    last_save, bad_steps, stopping = elapsed, [], False
    last_log = (step, elapsed)  # the throughput since the last log line gives the utilisation
    with stop.installed():
        while step < t.max_steps and progress_of(step, elapsed) < 1.0 and not stopping:
            factor = lr_factor(step, progress_of(step, elapsed), cfg)
            set_learning_rate(optimizer, cfg, factor)
            inputs, targets = (x.to(device) for x in stream.next_batch())
            micro_batches = my_micro_batches(inputs, targets, par, t.grad_accum)
            loss, parts, grad_norm = accumulate_gradients(
                model, optimizer, micro_batches, cfg, par, step
            )
            # one small all-reduce per step: the ranks agree on the loss, the stop request and the clock
            names = list(parts)
            host = torch.tensor(
                [float(stop.signal is not None), time.perf_counter() - started], device=device
            )
            local = torch.cat([torch.stack([loss, grad_norm, *(parts[k] for k in names)]), host])
            agreed = par.sum(local).cpu() / par.world  # the step's one host sync
            loss, grad_norm, parts = (
                agreed[0],
                agreed[1],
                dict(zip(names, agreed[2 : 2 + len(names)])),
            )
            stopping, elapsed = bool(agreed[-2] > 0), float(agreed[-1])
            culprit = finish_step(model, optimizer, loss, parts, grad_norm)
            step += 1

            if culprit is not None:
                bad_steps.append(step)
                if par.main:
                    _log(metrics_path, {"step": step, "skipped": culprit})
                    print(f"step {step}: non-finite {culprit}; step skipped", file=sys.stderr)
                if len(bad_steps) >= t.max_nonfinite_steps:
                    path = save()
                    raise UserError(
                        f"{len(bad_steps)} consecutive steps ({bad_steps[0]}-{step}) had a non-finite "
                        f"{culprit}; the last good weights are saved in {path}; lower --lr or "
                        "check the data, then continue with --resume"
                    )
            else:
                bad_steps = []
            if par.main and (step % t.log_every == 0 or step == t.max_steps):
                record = {
                    "step": step,
                    "bytes": step * bytes_per_step,
                    "elapsed": round(elapsed, 2),
                    "bytes_per_s": round(step * bytes_per_step / max(elapsed, 1e-9)),
                    "lr": t.lr * factor,
                    "loss": float(loss),
                    "grad_norm": float(grad_norm),
                    **{k: float(v) for k, v in parts.items()},
                }
                recent = (step - last_log[0]) * bytes_per_step / max(elapsed - last_log[1], 1e-9)
                if peak is not None:  # model-FLOPs utilisation of all ranks' devices together
                    record["mfu"] = round(flops * recent / (peak * par.world), 4)
                last_log = (step, elapsed)
                _log(metrics_path, record)
                bar.set_postfix(
                    loss=f"{record['loss_lm']:.3f}",
                    rate=f"{record.get('boundary_rate', 1.0):.3f}",
                    bytes_s=f"{record['bytes_per_s']:,}",
                )
            if step % t.eval_every == 0:
                last_val = validate()
                if par.main and not show:
                    print(
                        f"step {step}/{t.max_steps}  val bpb {last_val['val_bpb']:.4f}  "
                        f"rate {last_val.get('val_rate', 1.0):.3f}  {elapsed:.0f}s",
                        file=sys.stderr,
                    )
            due = step % t.checkpoint_every == 0 or elapsed - last_save >= 60 * t.checkpoint_minutes
            if due and step < t.max_steps:
                try:
                    save()
                # a full disk need not end the run: the next save may succeed
                except UserError as e:
                    warnings.warn(str(e))
                last_save = elapsed
            bar.update(1)
    bar.close()

    path = save()
    if stopping:
        if par.main:
            name = (
                signal.Signals(stop.signal).name
                if stop.signal is not None
                else "a stop request on another rank"
            )
            print(
                f"{name} at step {step}: checkpoint saved to {path}; continue with --resume",
                file=sys.stderr,
            )
        return {"interrupted": True, "step": step, "checkpoint": str(path)}
    if last_val.get("step") != step:
        last_val = validate()
    summary = {
        "interrupted": False,
        "step": step,
        "bytes": step * bytes_per_step,
        "elapsed": elapsed,
        "bytes_per_s": step * bytes_per_step / max(elapsed, 1e-9),
        "checkpoint": str(path),
        "parameters": sum(p.numel() for p in model.parameters()),
        **last_val,
    }
    if par.main:
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
