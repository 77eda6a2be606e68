"""Held-out metrics (SPEC section 7): bits per byte, boundary rate, whitespace alignment."""

from __future__ import annotations

import math

import torch
from torch import nn

from rltok.data import WHITESPACE, eval_batches
from rltok.objective import run_model
from rltok.runtime import autocast


@torch.no_grad()
def evaluate(model: nn.Module, docs: list[bytes], seq_len: int, batch_size: int = 16,
             greedy: bool = False, max_bytes: int | None = None, seed: int = 0,
             precision: str = "auto", per_document: bool = False) -> dict:
    """bpb (total bits / total bytes), bpb_doc_mean, rate, bytes_per_chunk, whitespace and word-start
    recall/precision;
    `per_document` adds bpb_per_document, one value per document (NaN where none of it was scored)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    doc_bits = torch.zeros(len(docs), dtype=torch.float64)
    doc_bytes = torch.zeros(len(docs), dtype=torch.float64)
    n_positions = n_boundaries = n_space = n_hits = n_starts = n_start_hits = 0
    whitespace = torch.tensor(WHITESPACE)
    for batch in eval_batches(docs, seq_len, batch_size, seed=seed, max_bytes=max_bytes):
        inputs, targets, valid = (t.to(device) for t in (batch.inputs, batch.targets, batch.valid))
        # greedy decoding of a Bernoulli policy is sampling with every uniform at 1/2: a = [p > 0.5]
        noise = torch.full_like(batch.noise, 0.5) if greedy else batch.noise
        with autocast(device, precision):
            out, nll = run_model(model, inputs, targets, valid, noise=noise.to(device))
        bits = (nll / math.log(2)).sum(dim=1).double().cpu()
        doc_bits.index_add_(0, batch.doc_index, bits)
        doc_bytes.index_add_(0, batch.doc_index, valid.sum(dim=1).double().cpu())
        if out.boundaries is None:
            continue
        # decisions at real input bytes: position 0 is BOS, the rest are bytes of the document
        decided = valid.cpu().clone()
        decided[:, 0] = False
        chosen = out.boundaries.cpu().bool() & decided
        space = torch.isin(batch.inputs, whitespace)
        is_space = space & decided
        # a word start is the first byte after whitespace: where chunks end when they end *before* words
        is_start = ~space & torch.cat([torch.zeros_like(space[:, :1]), space[:, :-1]], dim=1) & decided
        n_positions += int(decided.sum())
        n_boundaries += int(chosen.sum())
        n_space += int(is_space.sum())
        n_hits += int((is_space & chosen).sum())
        n_starts += int(is_start.sum())
        n_start_hits += int((is_start & chosen).sum())
    model.train(was_training)
    has_bytes = doc_bytes > 0
    metrics = {
        "bpb": float(doc_bits.sum() / doc_bytes.sum().clamp(min=1)),
        "bpb_doc_mean": float((doc_bits[has_bytes] / doc_bytes[has_bytes]).mean()) if has_bytes.any() else math.nan,
        "bytes": int(doc_bytes.sum()),
        "documents": int(has_bytes.sum()),
        "sampled": not greedy,
    }
    if per_document:
        metrics["bpb_per_document"] = (doc_bits / doc_bytes).tolist()  # 0/0 = NaN for unscored documents
    if n_positions:
        metrics.update({
            "rate": n_boundaries / n_positions,
            "bytes_per_chunk": n_positions / max(n_boundaries, 1),
            "whitespace_recall": n_hits / max(n_space, 1),
            "whitespace_precision": n_hits / max(n_boundaries, 1),
            "whitespace_fraction": n_space / n_positions,
            "word_start_recall": n_start_hits / max(n_starts, 1),
            "word_start_precision": n_start_hits / max(n_boundaries, 1),
        })
    return metrics
