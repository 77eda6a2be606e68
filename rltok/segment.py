"""Looking at boundaries: a text's chunks as terminal colours, JSON, or an HTML probability heat map."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass

import torch
from torch import nn

from rltok.boundaries import mode_noise
from rltok.errors import UserError
from rltok.text import encode


@dataclass
class Segmentation:
    """A text's bytes with one boundary decision and its probability per byte."""

    data: bytes
    boundaries: list[int]  # 1 = a chunk ends after this byte
    probs: list[float]

    def chunks(self) -> list[str]:
        """The chunks, decoded (a chunk cut inside a UTF-8 character shows U+FFFD)."""
        out, start = [], 0
        for i, ends in enumerate(self.boundaries):
            if ends or i == len(self.data) - 1:
                out.append(self.data[start : i + 1].decode("utf-8", errors="replace"))
                start = i + 1
        return out

    def per_character(self) -> list[tuple[str, bool, float]]:
        """(character, whether a chunk ends on one of its bytes, its bytes' highest boundary
        probability) per UTF-8 character."""
        return [
            (
                ch,
                any(self.boundaries[start : start + width]),
                max(self.probs[start : start + width]),
            )
            for ch, start, width in characters(self.data)
        ]

    def to_dict(self) -> dict:
        """{"boundaries": [0/1 per byte], "probs": [...], "chunks": [...]}."""
        return {
            "boundaries": self.boundaries,
            "probs": [round(p, 4) for p in self.probs],
            "chunks": self.chunks(),
        }


@torch.no_grad()
def segment(
    model: nn.Module, text: str | bytes, greedy: bool = False, seed: int = 0
) -> Segmentation:
    """Run the model over one text and record where it ends chunks (sampled, or p > 0.5 if greedy)."""
    ids = encode(text)[None].to(next(model.parameters()).device)
    data = bytes(ids[0, 1:].tolist())
    if model.tokenizer is not None:  # the BPE-token model: its chunks are its tokens
        boundaries = [0] * len(data)
        for end in model.tokenizer.get().encode(data)[1]:
            boundaries[end - 1] = 1
        return Segmentation(data, boundaries, [float(b) for b in boundaries])
    generator = torch.Generator().manual_seed(seed)
    noise = mode_noise(ids.shape) if greedy else torch.rand(ids.shape, generator=generator)
    out = model(ids, noise=noise.to(ids.device))
    if out.boundaries is None:
        raise UserError("this checkpoint is a flat byte model: it draws no boundaries to show")
    # position i + 1 of the model's input decides whether the chunk ends after byte i
    boundaries = out.boundaries[0, 1:].tolist()
    probs = (
        out.decision.probs[0, 1:].tolist()
        if out.decision.probs is not None
        else [float(b) for b in boundaries]
    )
    return Segmentation(data, boundaries, probs)


def characters(data: bytes):
    """(text, first byte, width) per UTF-8 character; an invalid byte is its own U+FFFD."""
    i = 0
    while i < len(data):
        lead = data[i]
        width = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        try:
            yield data[i : i + width].decode("utf-8"), i, width
        except UnicodeDecodeError:
            width = 1
            yield "\ufffd", i, 1
        i += width


def shown_character(ch: str) -> str:
    """A character as one visible glyph: newline, tab and return as arrows, other controls as a dot."""
    return {"\n": "⏎", "\t": "→", "\r": "␍"}.get(ch, ch if ch.isprintable() else "·")


def to_ansi(seg: Segmentation) -> str:
    """Chunks in alternating background colours."""
    colours = ("\x1b[48;5;153m\x1b[30m", "\x1b[48;5;223m\x1b[30m")
    reset = "\x1b[0m"
    parts = []
    for i, chunk in enumerate(seg.chunks()):
        # colour each line separately so a newline inside a chunk does not paint the terminal
        parts.append(
            "\n".join(colours[i % 2] + line + reset if line else "" for line in chunk.split("\n"))
        )
    return "".join(parts)


def to_plain(seg: Segmentation, separator: str = "|") -> str:
    """Chunks joined by a visible separator (for logs and docs)."""
    return separator.join(seg.chunks())


def to_json(seg: Segmentation) -> str:
    """The segmentation as one JSON object."""
    return json.dumps(seg.to_dict(), ensure_ascii=False)


def to_html(seg: Segmentation, title: str = "rltok segmentation") -> str:
    """A self-contained page: each character's background shows its boundary probability, chunk ends are marked."""
    spans = []
    for ch, ends, p in seg.per_character():
        shown = "\u21b5\n" if ch == "\n" else html.escape(ch)
        cls = ' class="end"' if ends else ""
        spans.append(
            f'<span{cls} style="background:rgba(220,60,40,{p:.3f})" title="p={p:.3f}">{shown}</span>'
        )
    n_chunks = len(seg.chunks())
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
pre {{ font-family: monospace; font-size: 15px; line-height: 1.8; white-space: pre-wrap; }}
span.end {{ border-right: 2px solid #1a4; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{len(seg.data)} bytes, {n_chunks} chunks ({len(seg.data) / max(n_chunks, 1):.2f} bytes per chunk).
Background: probability that a chunk ends at the character; green bar: a chunk ends there.</p>
<pre>{"".join(spans)}</pre>
</body></html>
"""
