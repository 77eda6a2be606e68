"""Held-out metrics (docs/usage.md): bits per byte, boundary rate, whitespace alignment."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from rltok.boundaries import mode_noise
from rltok.boundaries.base import decided_positions
from rltok.data import eval_batches
from rltok.gold_scores import gold_counts, gold_metrics
from rltok.objective import gold_forced, run_model
from rltok.runtime import autocast
from rltok.text import is_whitespace, word_starts


@torch.no_grad()
def evaluate(
    model: nn.Module,
    docs: list[bytes],
    seq_len: int,
    batch_size: int = 16,
    greedy: bool | None = None,
    max_bytes: int | None = None,
    seed: int = 0,
    precision: str = "auto",
    per_document: bool = False,
    part: tuple[int, int] = (0, 1),
    sum_across: Callable[[torch.Tensor], torch.Tensor] | None = None,
    gold: list[bytes] | None = None,
) -> dict:
    """bpb (total bits / total bytes), bpb_doc_mean, rate, bytes_per_chunk, whitespace and word-start
    recall/precision; `per_document` adds bpb_per_document, one value per document (NaN where none of it
    was scored). Under data parallelism, `part` = (rank, ranks) scores every ranks-th batch and
    `sum_across` adds up the counts of all ranks, so every rank returns the figures of the whole split.
    `gold`: the documents' gold end masks, which add the chunk ends' scores against the gold words
    (rltok.gold_scores) and are the segmentation of the gold oracle."""
    if greedy is None:  # the model's own rule: the segmentation its language model trained on
        greedy = model.boundary_method.reads_greedily
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    doc_bits = torch.zeros(len(docs), dtype=torch.float64)
    doc_bytes = torch.zeros(len(docs), dtype=torch.float64)
    # positions, boundaries, spaces, hits, starts, start hits
    counts = torch.zeros(6, dtype=torch.float64)
    against_gold = torch.zeros(12, dtype=torch.float64)
    batches = eval_batches(docs, seq_len, batch_size, seed=seed, max_bytes=max_bytes, gold=gold)
    rank, ranks = part
    for i in range(rank, -(-len(batches) // ranks) * ranks, ranks):
        # a rank without a batch of its own still runs one, uncounted: sharded weights need every rank
        counted = i < len(batches)
        batch = batches[i if counted else 0]
        inputs, targets, valid = (t.to(device) for t in (batch.inputs, batch.targets, batch.valid))
        # greedy decoding of a Bernoulli policy is sampling with every uniform at 1/2: a = [p > 0.5]
        noise = mode_noise(batch.noise.shape) if greedy else batch.noise
        forced = gold_forced(model, batch.gold)
        with autocast(device, precision):
            out, nll = run_model(
                model, inputs, targets, valid, noise=noise.to(device), boundaries=forced
            )
        if not counted:
            continue
        bits = (nll / math.log(2)).sum(dim=1).double().cpu()
        doc_bits.index_add_(0, batch.doc_index, bits)
        doc_bytes.index_add_(0, batch.doc_index, valid.sum(dim=1).double().cpu())
        if out.boundaries is None:
            continue
        counts += boundary_counts(batch.inputs, out.boundaries.cpu(), valid.cpu())
        if batch.gold is not None:
            decided = decided_positions(valid.cpu())
            against_gold += gold_counts(out.boundaries.cpu(), batch.gold, decided)
    model.train(was_training)
    if sum_across is not None:
        doc_bits, doc_bytes, counts, against_gold = (
            sum_across(torch.cat([doc_bits, doc_bytes, counts, against_gold]).to(device))
            .cpu()
            .split([len(docs), len(docs), len(counts), len(against_gold)])
        )
    has_bytes = doc_bytes > 0
    metrics = {
        "bpb": float(doc_bits.sum() / doc_bytes.sum().clamp(min=1)),
        "bpb_doc_mean": float((doc_bits[has_bytes] / doc_bytes[has_bytes]).mean())
        if has_bytes.any()
        else math.nan,
        "bytes": int(doc_bytes.sum()),
        "documents": int(has_bytes.sum()),
        "sampled": not greedy,
    }
    if per_document:
        # 0/0 = NaN for unscored documents
        metrics["bpb_per_document"] = (doc_bits / doc_bytes).tolist()
    metrics |= boundary_metrics(counts)
    if gold is not None and counts[0] > 0:
        metrics |= gold_metrics(against_gold)
    return metrics


def boundary_counts(
    inputs: torch.Tensor, boundaries: torch.Tensor, valid: torch.Tensor
) -> torch.Tensor:
    """Counts of a batch's chunk ends (B, L) against its whitespace and word starts: positions,
    boundaries, spaces, boundaries on spaces, word starts, boundaries on word starts (float64)."""
    # decisions at real input bytes: position 0 is BOS, the rest are bytes of the document
    decided = decided_positions(valid)
    chosen = boundaries.bool() & decided
    is_space = is_whitespace(inputs) & decided
    # where chunks end when they end *before* words (the word-start rule's own definition)
    is_start = word_starts(inputs) & decided
    return torch.tensor(
        [
            decided.sum(),
            chosen.sum(),
            is_space.sum(),
            (is_space & chosen).sum(),
            is_start.sum(),
            (is_start & chosen).sum(),
        ],
        dtype=torch.float64,
    )


def boundary_metrics(counts: torch.Tensor) -> dict:
    """Rate, bytes per chunk, and whitespace and word-start recall and precision from summed
    `boundary_counts`; nothing where no position was decided (models that draw no boundaries)."""
    n_positions, n_boundaries, n_space, n_hits, n_starts, n_start_hits = (int(c) for c in counts)
    if not n_positions:
        return {}
    return {
        "rate": n_boundaries / n_positions,
        "bytes_per_chunk": n_positions / max(n_boundaries, 1),
        "whitespace_recall": n_hits / max(n_space, 1),
        "whitespace_precision": n_hits / max(n_boundaries, 1),
        "whitespace_fraction": n_space / n_positions,
        "word_start_recall": n_start_hits / max(n_starts, 1),
        "word_start_precision": n_start_hits / max(n_boundaries, 1),
    }
