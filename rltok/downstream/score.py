"""Zero-shot scoring: the log-likelihood of each option's continuation given its context.

Every model kind is scored the same way, as the sum of its per-byte losses over the continuation's
bytes. Each sequence is BOS + context + continuation, as in training; a context too long for the
sequence length loses its oldest bytes (the same number for every option of an item, so the options
still share it), and a continuation longer than that is scored in consecutive windows like `eval`.
Boundaries are decided causally and the sampling noise is keyed by the item and the byte position,
so the context's chunks are the same whichever option follows. The BPE-token model tokenizes the
context and the continuation apart (as lm-eval-harness does), so its context tokens never depend on
the option either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from tqdm import tqdm

from rltok.downstream.tasks import Item
from rltok.runtime import autocast, seed_of
from rltok.text import BOS


@dataclass(frozen=True)
class Request:
    """Score text[scored_from:] given text[:scored_from]; `key` names the sampling noise (one per item)."""

    text: bytes
    scored_from: int
    key: int


@dataclass(frozen=True)
class _Row:
    request: int
    sample: int
    start: int  # the window is text[start:end], its bytes from `scored` on are scored
    end: int
    scored: int


def _rows(requests: list[Request], seq_len: int, samples: int) -> list[_Row]:
    """Windows of at most seq_len target bytes that together score every continuation byte once."""
    rows = []
    for r, request in enumerate(requests):
        end = len(request.text)
        while end > request.scored_from:
            start = max(0, end - seq_len)
            rows += [
                _Row(r, s, start, end, max(start, request.scored_from)) for s in range(samples)
            ]
            end = start
    # similar lengths in a batch: little padding
    return sorted(rows, key=lambda row: row.end - row.start, reverse=True)


def _noise(key: int, sample: int, seed: int, start: int, length: int) -> torch.Tensor:
    """Uniforms for the decisions at text positions start-1 (BOS) .. start+length-2, the same for every
    request that shares the key, whatever its length."""
    generator = torch.Generator().manual_seed(seed_of(seed, key, sample))
    return torch.rand(start + length, generator=generator)[start:]


@torch.no_grad()
def continuation_nll(
    model: nn.Module,
    requests: list[Request],
    seq_len: int,
    batch_size: int = 16,
    samples: int = 1,
    greedy: bool = False,
    seed: int = 0,
    precision: str = "auto",
    progress: bool = False,
) -> list[tuple[float, bool]]:
    """Negative log-likelihood (nats) of each request's scored bytes, averaged over `samples` draws of
    the boundaries (one when `greedy`), and whether every scored byte was the model's most likely one
    (on the first draw; always False for the BPE-token model, which scores without byte logits)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    samples = 1 if greedy else samples
    totals = torch.zeros(len(requests), samples, dtype=torch.float64)
    is_greedy = torch.ones(len(requests), dtype=torch.bool)
    rows = _rows(requests, seq_len, samples)
    bar = tqdm(total=len(rows), disable=not progress, unit="seq", dynamic_ncols=True, leave=False)
    for i in range(0, len(rows), batch_size):
        batch = rows[i : i + batch_size]
        L = max(row.end - row.start for row in batch)
        targets = torch.zeros(len(batch), L, dtype=torch.long)
        valid = torch.zeros(len(batch), L, dtype=torch.bool)
        scored = torch.zeros(len(batch), L, dtype=torch.bool)
        noise = torch.full((len(batch), L), 0.5)
        starts = torch.zeros(len(batch), dtype=torch.long)
        for b, row in enumerate(batch):
            request = requests[row.request]
            n = row.end - row.start
            targets[b, :n] = torch.tensor(list(request.text[row.start : row.end]), dtype=torch.long)
            valid[b, :n] = True
            scored[b, row.scored - row.start : n] = True
            starts[b] = row.scored - row.start
            if not greedy:
                noise[b] = _noise(request.key, row.sample, seed, row.start, L)
        inputs = torch.cat(
            [torch.full((len(batch), 1), BOS, dtype=torch.long), targets[:, :-1]], dim=1
        )
        inputs, targets, valid, noise, starts = (
            t.to(device) for t in (inputs, targets, valid, noise, starts)
        )
        with autocast(device, precision):
            if model.tokenizer is not None:  # it tokenizes the context and the continuation apart
                out = model(inputs, targets=targets, valid=valid, starts=starts)
            else:
                out = model(inputs, noise=noise, targets=targets, valid=valid)
        nll = out.nll
        if out.logits is None:  # scored without byte logits: no greedy answer to check
            top = torch.zeros(len(batch), dtype=torch.bool)
        else:
            top = ((out.logits.argmax(dim=-1) == targets) | ~scored.to(device)).all(dim=1).cpu()
        per_row = (nll.float().cpu() * scored).sum(dim=1).double()
        for b, row in enumerate(batch):
            totals[row.request, row.sample] += per_row[b]
            if row.sample == 0:
                is_greedy[row.request] &= bool(top[b])
        bar.update(len(batch))
    bar.close()
    model.train(was_training)
    return list(zip(totals.mean(dim=1).tolist(), is_greedy.tolist()))


def fitted_requests(pairs: list[tuple[bytes, bytes]], key: int, seq_len: int) -> list[Request]:
    """One request per (context, continuation) pair; the contexts lose the same oldest bytes, as many
    as the longest pair needs to fit seq_len (never a continuation's)."""
    excess = max(len(c) + len(s) for c, s in pairs) - seq_len
    cut = max(0, min(excess, min(len(c) for c, _ in pairs)))
    return [Request((c + s)[cut:], len(c) - cut, key) for c, s in pairs]


def item_requests(items: list[Item], seq_len: int) -> list[Request]:
    """One request per option, items in order."""
    requests = []
    for key, item in enumerate(items):
        pairs = [
            (context.encode(), continuation.encode()) for context, continuation in item.options
        ]
        requests += fitted_requests(pairs, key, seq_len)
    return requests


def _ratio_se(bits: torch.Tensor, n_bytes: torch.Tensor) -> float:
    """Standard error of sum(bits) / sum(bytes) over items (delta method for a ratio estimator)."""
    n = len(bits)
    if n < 2:
        return math.nan
    ratio = bits.sum() / n_bytes.sum()
    residual = bits - ratio * n_bytes
    return float((residual.pow(2).sum() / (n * (n - 1))).sqrt() / n_bytes.mean())


def _mean_se(hits: torch.Tensor) -> float:
    n = len(hits)
    return float(hits.std() / math.sqrt(n)) if n > 1 else math.nan


def score_items(
    model: nn.Module,
    items: list[Item],
    seq_len: int,
    batch_size: int = 16,
    samples: int = 1,
    greedy: bool = False,
    seed: int = 0,
    precision: str = "auto",
    progress: bool = False,
) -> dict:
    """Accuracy (by log-likelihood, and by log-likelihood per byte), the bits per byte of the right
    continuation, each with its standard error, over the items."""
    requests = item_requests(items, seq_len)
    nll = [
        n
        for n, _ in continuation_nll(
            model, requests, seq_len, batch_size, samples, greedy, seed, precision, progress
        )
    ]
    acc, acc_norm, bits, n_bytes = [], [], [], []
    i = 0
    for item in items:
        k = len(item.options)
        item_nll = torch.tensor(nll[i : i + k], dtype=torch.float64)
        lengths = torch.tensor(
            [len(requests[i + o].text) - requests[i + o].scored_from for o in range(k)],
            dtype=torch.float64,
        )
        i += k
        acc.append(float(int(item_nll.argmin()) == item.answer))
        acc_norm.append(float(int((item_nll / lengths).argmin()) == item.answer))
        bits.append(float(item_nll[item.answer]) / math.log(2))
        n_bytes.append(float(lengths[item.answer]))
    acc_t, norm_t, bits_t, bytes_t = (
        torch.tensor(v, dtype=torch.float64) for v in (acc, acc_norm, bits, n_bytes)
    )
    return {
        "items": len(items),
        "acc": float(acc_t.mean()),
        "acc_se": _mean_se(acc_t),
        "acc_norm": float(norm_t.mean()),
        "acc_norm_se": _mean_se(norm_t),
        "bpb": float(bits_t.sum() / bytes_t.sum()),
        "bpb_se": _ratio_se(bits_t, bytes_t),
        "chance": float(sum(1 / len(item.options) for item in items) / len(items)),
    }
