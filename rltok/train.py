"""One training loop for every boundary method: AdamW, warm-up then cosine, clipping, bf16 autocast,
JSON-lines metrics, periodic validation, atomic checkpoints, and Ctrl-C / SIGTERM that save and stop."""

from __future__ import annotations

import json
import shutil
import signal
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
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
from rltok.objective import gold_forced
from rltok.parallel import Parallel, PeerFailure
from rltok.pretrained import build_model, load_weights
from rltok.runlock import run_lock
from rltok.runtime import default_device, uses_bf16
from rltok.segment import segment, to_plain
from rltok.step import (
    accumulate_gradients,
    finish_step,
    lr_factor,
    make_optimizer,
    my_micro_batches,
    set_learning_rate,
)
from rltok.tracking import Trackers, held_out_line


def fit_tokenizer(cfg: Config, docs: list[bytes], run_dir: Path) -> ByteBPE | None:
    """For methods that read BPE tokens: train the BPE on the training split, record its size in the
    config, and keep a readable copy as RUN/bpe.json."""
    b = cfg.boundaries
    if not cfg.reads_bpe:
        return None
    bpe = fit_bpe(docs, b.target_rate, b.bpe_vocab)
    b.bpe_vocab = bpe.vocab_size
    (run_dir / "bpe.json").write_bytes(bpe.to_bytes())
    print(
        f"rltok: trained a byte-level BPE of {bpe.vocab_size} tokens on the training split",
        file=sys.stderr,
    )
    return bpe


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
    peak_tflops: float | None = None,
    log_to: tuple[str, ...] = (),
) -> dict:
    """Train until cfg.train.max_steps (or time_limit seconds); return the final summary. Launched by
    torchrun, every process trains its share of each batch with DDP (or FSDP2 with `fsdp`) and rank 0
    alone writes the run directory; `compile` compiles each transformer block with torch.compile;
    `peak_tflops` sets the peak that the logged utilisation (mfu) divides by, where the table lacks it;
    `log_to` names trackers (rltok.tracking) that rank 0 sends metrics.jsonl's records to."""
    cfg.validate()
    if cfg.reads_gold and corpus.gold is None:
        raise UserError(
            f"--boundaries {cfg.boundaries.method} ends chunks on the corpus's gold words, and "
            f"{corpus.name} has none: prepare one with them (rltok data prepare chinese or "
            "english-nospace) and pass it to --data"
        )
    run_dir = Path(run_dir)
    par, device = Parallel.start(
        torch.device(device) if device is not None else default_device(), fsdp
    )
    peer_failed = False
    try:
        started = (cfg, corpus, run_dir, resume, time_limit, device, par, compile, log_to)
        if not par.main:
            run = Run.start(*started)
            return _train_loop(run, device, progress, peak_tflops)
        if resume and not (run_dir / "config.json").exists():
            raise UserError(f"{run_dir} holds no run to resume; drop --resume to start a fresh run")
        fresh = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)
        try:
            with run_lock(run_dir):
                run = Run.start(*started)
                resumed_at = run.step if resume else None
                with Trackers(list(log_to), run_dir, json.loads(cfg.to_json()), resumed_at) as t:
                    run.trackers = t
                    return _train_loop(run, device, progress, peak_tflops)
        except BaseException:
            # failed before it wrote anything (a tracker that would not open, say): leave nothing
            # behind; a checkpoint can come before the first record, and is never thrown away
            if fresh and not _wrote_anything(run_dir):
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
    except Exception as e:
        if par.world > 1 and _is_collective_failure(e):
            peer_failed = True
            # torchrun's agent is about to SIGTERM every rank; this one exits next anyway, and the
            # signal must not cut short the checkpoint search and the message (seen under load)
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            found = latest(run_dir) if run_dir.exists() else None
            raise PeerFailure(
                f"another process of this {par.world}-process run stopped (its own message says "
                f"why); the newest complete checkpoint is {found or 'not written yet'}; fix the "
                "cause and relaunch with --resume"
            ) from None
        raise
    finally:
        par.stop(peer_failed)


def _wrote_anything(run_dir: Path) -> bool:
    """Whether a run directory holds a metrics record or a checkpoint (complete or not)."""
    return (run_dir / "metrics.jsonl").exists() or any((run_dir / "checkpoints").glob("*"))


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


@dataclass
class Run:
    """A training run in progress on this process: what it trains, where it writes, how far it is."""

    cfg: Config
    corpus: Corpus
    run_dir: Path
    par: Parallel
    model: nn.Module  # as wrapped for this run's parallelism
    optimizer: torch.optim.Optimizer
    stream: TrainStream
    time_limit: float | None
    log_to: tuple[str, ...] = ()  # trackers: every rank draws their segmentation sample
    trackers: Trackers | None = None  # rank 0's open trackers
    step: int = 0
    elapsed: float = 0.0

    @classmethod
    def start(
        cls,
        cfg: Config,
        corpus: Corpus,
        run_dir: Path,
        resume: bool,
        time_limit: float | None,
        device: torch.device,
        par: Parallel,
        compile: bool,
        log_to: tuple[str, ...] = (),
    ) -> Run:
        """Build the model (fitting a BPE first where the config reads one), or take it back from the
        newest checkpoint when resuming, and write the run's config."""
        t = cfg.train
        if t.batch_size % (par.world * t.grad_accum):
            raise UserError(
                f"--batch-size {t.batch_size} does not split into {par.world} processes x "
                f"--grad-accum {t.grad_accum} equal micro-batches; make it a multiple of "
                f"{par.world * t.grad_accum}"
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
        stream = TrainStream(
            corpus.train, t.seq_len, t.batch_size, seed=t.seed, gold=corpus.gold_of("train")
        )
        boundary = model.boundary_method
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
            boundary.restore_state(state)
        if compile:  # block by block: the main network's chunk count varies, so shapes are dynamic
            # every block shares Block.forward, and so dynamo's 8 compiles per function: byte and
            # packed layers, with and without gradient, already take 7 on the CPU, and past the
            # budget the blocks would run uncompiled
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
            for module in model.modules():
                if isinstance(module, Block):
                    module.compile(dynamic=True)
        model = par.wrap(model.to(device), device, uses_bf16(device, t.precision))
        boundary.share_across(par.sum)
        optimizer = make_optimizer(model, cfg)
        run = cls(cfg, corpus, run_dir, par, model, optimizer, stream, time_limit, tuple(log_to))
        if state is not None:
            par.load_optimizer_state(model, optimizer, state["optimizer"])
            run.step, run.elapsed = state["step"], state["elapsed"]
        if par.main:
            if state is not None:
                _truncate_metrics(run.metrics_path, run.step)
            (run_dir / "config.json").write_text(cfg.to_json())
        return run

    @property
    def metrics_path(self) -> Path:
        """metrics.jsonl: training and validation records, one JSON object per line."""
        return self.run_dir / "metrics.jsonl"

    @property
    def bytes_seen(self) -> int:
        """Training bytes so far, over every rank."""
        return self.step * self.cfg.train.batch_size * self.cfg.train.seq_len

    def progress(self) -> float:
        """How far the schedule has come, in [0, 1]: by steps, or by the clock when it is limited."""
        done = self.step / self.cfg.train.max_steps
        return max(done, self.elapsed / self.time_limit) if self.time_limit else done

    def log(self, record: dict) -> None:
        """Append a record to metrics.jsonl and send it to the trackers (rank 0 writes; the others
        hold the same numbers)."""
        if self.par.main:
            _log(self.metrics_path, record)
            if self.trackers is not None:
                self.trackers.log(record)

    def save(self) -> Path | None:
        """A checkpoint of the weights and everything a resume needs (rank 0 writes it)."""
        weights = self.par.full_weights(self.model)
        optimizer_state = self.par.full_optimizer_state(self.model, self.optimizer)
        if not self.par.main:
            return None
        state = {
            "step": self.step,
            "elapsed": self.elapsed,
            "optimizer": optimizer_state,
            "stream_rng": self.stream.generator.get_state(),
            "corpus": self.corpus.describe(),
            **self.model.boundary_method.carried_state(),
        }
        t = self.cfg.train
        return save_checkpoint(self.run_dir, weights, self.cfg, state, keep=t.keep_checkpoints)

    def validate(self) -> dict:
        """Score the validation split (every rank its share, in batches of a training micro-batch's
        rows, so validation needs no more memory than a step) and log it."""
        t = self.cfg.train
        scores = evaluate(
            self.model,
            self.corpus.val,
            t.seq_len,
            t.batch_size // (self.par.world * t.grad_accum),
            max_bytes=t.eval_bytes,
            precision=t.precision,
            part=(self.par.rank, self.par.world),
            sum_across=self.par.sum,
            gold=self.corpus.gold_of("val"),
        )
        record = {
            "step": self.step,
            "bytes": self.bytes_seen,
            "elapsed": round(self.elapsed, 2),
            **{f"val_{k}": v for k, v in scores.items()},
        }
        self.log(record)
        if self.log_to:
            sample = self.segmentation_sample()  # on every rank: an FSDP forward is collective
            if self.trackers is not None:
                self.trackers.text(self.step, "val_segmentation", sample)
        return record

    def segmentation_sample(self) -> str:
        """A held-out line (`held_out_line`) with `|` after each chunk's last byte, as the model
        draws them now (greedy)."""
        text = held_out_line(self.corpus.val[0])
        self.model.eval()
        try:
            return to_plain(segment(self.model, text, greedy=True))
        except UserError:  # a model without boundaries (flat bytes)
            return text
        finally:
            self.model.train()


def _agree(
    run: Run, loss: Tensor, grad_norm: Tensor, parts: dict, stop: StopFlag, started: float
) -> tuple[Tensor, Tensor, dict, bool]:
    """One small all-reduce per step, its one host sync: the ranks agree on the loss, its parts, the
    gradient norm, the stop request and the clock (kept in run.elapsed); returns the first four."""
    names = list(parts)
    host = torch.tensor(
        [float(stop.signal is not None), time.perf_counter() - started], device=loss.device
    )
    local = torch.cat([torch.stack([loss, grad_norm, *(parts[k] for k in names)]), host])
    agreed = run.par.sum(local).cpu() / run.par.world
    run.elapsed = float(agreed[-1])
    parts = dict(zip(names, agreed[2 : 2 + len(names)]))
    return agreed[0], agreed[1], parts, bool(agreed[-2] > 0)


def _count_bad_step(run: Run, bad_steps: list[int], culprit: str | None) -> list[int]:
    """The run of consecutive skipped steps after this one; too long a run saves and stops."""
    if culprit is None:
        return []
    step = run.step
    bad_steps = [*bad_steps, step]
    run.log({"step": step, "skipped": culprit})
    if run.par.main:
        print(f"step {step}: non-finite {culprit}; step skipped", file=sys.stderr)
    if len(bad_steps) >= run.cfg.train.max_nonfinite_steps:
        path = run.save()
        raise UserError(
            f"{len(bad_steps)} consecutive steps ({bad_steps[0]}-{step}) had a non-finite "
            f"{culprit}; the last good weights are saved in {path}; lower --lr or "
            "check the data, then continue with --resume"
        )
    return bad_steps


def _step_record(
    run: Run,
    lr: float,
    loss: Tensor,
    grad_norm: Tensor,
    parts: dict,
    since: tuple[int, float],
    peak: float | None,
) -> dict:
    """The metrics line of a step: its losses and statistics, throughput and, where the device's peak
    is known, the model-FLOPs utilisation since the last line (`since`: its step and clock)."""
    t = run.cfg.train
    elapsed = run.elapsed
    record = {
        "step": run.step,
        "bytes": run.bytes_seen,
        "elapsed": round(elapsed, 2),
        "bytes_per_s": round(run.bytes_seen / max(elapsed, 1e-9)),
        "lr": lr,
        "loss": float(loss),
        "grad_norm": float(grad_norm),
        **{k: float(v) for k, v in parts.items()},
    }
    recent = (run.step - since[0]) * t.batch_size * t.seq_len / max(elapsed - since[1], 1e-9)
    if peak is not None:  # utilisation of all ranks' devices together, at the step's measured rate
        # (the main network's work follows the chunk count)
        rate = record.get("boundary_rate", run.cfg.boundaries.target_rate)
        flops = flops_per_byte(run.model, rate, t.seq_len)
        record["mfu"] = round(flops * recent / (peak * run.par.world), 4)
    return record


def _train_loop(
    run: Run, device: torch.device, progress: bool | None, peak_tflops: float | None
) -> dict:
    """Train a started run to its end (or a stop request), checkpointing and validating on the way;
    return its summary."""
    cfg, par, model, optimizer = run.cfg, run.par, run.model, run.optimizer
    t = cfg.train
    peak = peak_tflops * 1e12 if peak_tflops else peak_flops(device)
    show = par.main and (sys.stderr.isatty() if progress is None else progress)
    bar = tqdm(
        total=t.max_steps, initial=run.step, disable=not show, unit="step", dynamic_ncols=True
    )
    stop = StopFlag()
    model.train()
    started = time.perf_counter() - run.elapsed
    last_val: dict = {}
    last_save, bad_steps, stopping = run.elapsed, [], False
    last_log = (
        run.step,
        run.elapsed,
    )  # the throughput since the last log line gives the utilisation
    with stop.installed():
        while run.step < t.max_steps and run.progress() < 1.0 and not stopping:
            factor = lr_factor(run.step, run.progress(), cfg)
            set_learning_rate(optimizer, cfg, factor, model.boundary_method.lr_scale(run.step))
            batch = run.stream.next_batch(gold=model.boundary_method.reads_gold)
            inputs, targets = (x.to(device) for x in batch[:2])
            forced = gold_forced(model, batch[2]) if len(batch) > 2 else None
            micro_batches = my_micro_batches(inputs, targets, par, t.grad_accum, forced)
            loss, parts, grad_norm = accumulate_gradients(
                model, optimizer, micro_batches, cfg, par, run.step
            )
            loss, grad_norm, parts, stopping = _agree(run, loss, grad_norm, parts, stop, started)
            culprit = finish_step(model, optimizer, loss, parts, grad_norm)
            run.step += 1
            step, elapsed = run.step, run.elapsed
            bad_steps = _count_bad_step(run, bad_steps, culprit)
            if par.main and (step % t.log_every == 0 or step == t.max_steps):
                record = _step_record(run, t.lr * factor, loss, grad_norm, parts, last_log, peak)
                last_log = (step, elapsed)
                run.log(record)
                bar.set_postfix(
                    loss=f"{record['loss_lm']:.3f}",
                    rate=f"{record.get('boundary_rate', 1.0):.3f}",
                    bytes_s=f"{record['bytes_per_s']:,}",
                )
            if step % t.eval_every == 0:
                last_val = run.validate()
                if par.main and not show:
                    print(
                        f"step {step}/{t.max_steps}  val bpb {last_val['val_bpb']:.4f}  "
                        f"rate {last_val.get('val_rate', 1.0):.3f}  {elapsed:.0f}s",
                        file=sys.stderr,
                    )
            due = step % t.checkpoint_every == 0 or elapsed - last_save >= 60 * t.checkpoint_minutes
            if due and step < t.max_steps:
                try:
                    run.save()
                # a full disk need not end the run: the next save may succeed
                except UserError as e:
                    warnings.warn(str(e))
                last_save = elapsed
            bar.update(1)
    bar.close()
    return _finish(run, stop, stopping, last_val)


def _finish(run: Run, stop: StopFlag, stopping: bool, last_val: dict) -> dict:
    """Save the last checkpoint; after a stop request say how to continue, else validate the final
    weights (unless the last step just did) and write summary.json."""
    path = run.save()
    if stopping:
        if run.par.main:
            name = (
                signal.Signals(stop.signal).name
                if stop.signal is not None
                else "a stop request on another rank"
            )
            print(
                f"{name} at step {run.step}: checkpoint saved to {path}; continue with --resume",
                file=sys.stderr,
            )
        return {"interrupted": True, "step": run.step, "checkpoint": str(path)}
    if last_val.get("step") != run.step:
        last_val = run.validate()
    summary = {
        "interrupted": False,
        "step": run.step,
        "bytes": run.bytes_seen,
        "elapsed": run.elapsed,
        "bytes_per_s": run.bytes_seen / max(run.elapsed, 1e-9),
        "checkpoint": str(path),
        "parameters": sum(p.numel() for p in run.model.parameters()),
        **last_val,
    }
    if run.par.main:
        (run.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
