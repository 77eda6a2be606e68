"""Chunk ends scored against gold word boundaries, for corpora that have them (rltok.data.gold).

A model may learn either edge of a word (on English the best rule ends a chunk on a word's first
byte), so chunk ends are read against the gold tokens' last bytes ("end") and against their first
bytes ("start"). For each edge: boundary precision, recall and F1 over the decided bytes, and token
F1: a gold token counts as found when a chunk end falls on its edge at both its sides and on none in
between (for "start": on its first byte and on the next token's first byte), the unsupervised word
segmentation literature's word-token F1.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rltok.text import GOLD_END, GOLD_START

EDGES = (("end", GOLD_END), ("start", GOLD_START))
# per edge: chunk ends, gold edges, hits, chunk tokens, gold tokens, gold tokens found
_PER_EDGE = 6


def _tokens(cuts: Tensor, chosen: Tensor) -> tuple[Tensor, Tensor]:
    """Gold tokens with both edges in `cuts` (B, L), and those of them whose edges are both in
    `chosen` with no chosen position in between."""
    B, L = cuts.shape
    index = torch.arange(L, device=cuts.device).expand(B, L)
    last_cut = torch.where(cuts, index, -1).cummax(1).values
    previous = torch.nn.functional.pad(last_cut[:, :-1], (1, 0), value=-1)  # strictly before t
    token = cuts & (previous >= 0)
    before = previous.clamp(min=0)
    seen = chosen.long().cumsum(1)
    inside = seen.gather(1, (index - 1).clamp(min=0)) - seen.gather(1, before)
    found = token & chosen & chosen.gather(1, before) & (inside == 0)
    return token.sum(), found.sum()


def gold_counts(chosen: Tensor, gold: Tensor, decided: Tensor) -> Tensor:
    """Counts (float64, 12) of chunk ends `chosen` (B, L) against gold codes `gold` (B, L) at the
    `decided` positions, for `gold_metrics`."""
    chosen = chosen.bool() & decided
    counts = []
    for _, bit in EDGES:
        cuts = (gold & bit).bool() & decided
        tokens, found = _tokens(cuts, chosen)
        chunks = (chosen.sum(1) - 1).clamp(min=0).sum()
        counts += [chosen.sum(), cuts.sum(), (chosen & cuts).sum(), chunks, tokens, found]
    return torch.stack(counts).double().cpu()


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def gold_metrics(counts: Tensor) -> dict[str, float]:
    """Boundary precision, recall and F1 and token F1 per edge from summed `gold_counts`, and
    `gold_token_f1`, the better edge's."""
    metrics = {}
    for e, (edge, _) in enumerate(EDGES):
        ends, gold, hits, chunks, tokens, found = counts[
            e * _PER_EDGE : (e + 1) * _PER_EDGE
        ].tolist()
        precision, recall = hits / max(ends, 1), hits / max(gold, 1)
        token_precision, token_recall = found / max(chunks, 1), found / max(tokens, 1)
        metrics |= {
            f"gold_{edge}_precision": precision,
            f"gold_{edge}_recall": recall,
            f"gold_{edge}_f1": _f1(precision, recall),
            f"gold_{edge}_token_f1": _f1(token_precision, token_recall),
        }
    metrics["gold_token_f1"] = max(metrics["gold_end_token_f1"], metrics["gold_start_token_f1"])
    return metrics
