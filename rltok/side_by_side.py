"""One text segmented by several models, one line per model, aligned character for character.

Every view cuts the text into columns of whole characters (a newline shows as ⏎, so lines never
break inside a view) and wraps it in blocks; within a block each model's line holds exactly the same
characters, so where each model cuts can be read straight down the page.
"""

from __future__ import annotations

import html

from rltok.segment import Segmentation, shown_character

COLOURS = ("\x1b[48;5;153m\x1b[30m", "\x1b[48;5;223m\x1b[30m")
RESET = "\x1b[0m"


def _columns(seg: Segmentation) -> list[tuple[str, bool, float, int]]:
    """(shown character, a chunk ends after it, its boundary probability, the shade of its chunk:
    0 or 1, alternating) per character."""
    out, chunk = [], 0
    for ch, ends, p in seg.per_character():
        out.append((shown_character(ch), ends, p, chunk % 2))
        chunk += ends
    return out


def _blocks(n: int, width: int) -> list[range]:
    return [range(i, min(i + width, n)) for i in range(0, n, width)]


def side_by_side_ansi(segs: dict[str, Segmentation], width: int = 80) -> str:
    """Each model's line shows the text with its chunks in alternating colours."""
    columns = {name: _columns(seg) for name, seg in segs.items()}
    label = max(map(len, segs))
    lines = []
    for block in _blocks(len(next(iter(columns.values()))), width):
        for name, cols in columns.items():
            parts, shown = [], None
            for i in block:
                if shown != cols[i][3]:  # a colour code only where the shade changes
                    shown = cols[i][3]
                    parts.append(COLOURS[shown])
                parts.append(cols[i][0])
            lines.append(f"{name:>{label}}  " + "".join(parts) + RESET)
        lines.append("")
    return "\n".join(lines)


def side_by_side_plain(segs: dict[str, Segmentation], width: int = 80) -> str:
    """The text on one line, then one line per model with | under each character that ends a chunk."""
    columns = {name: _columns(seg) for name, seg in segs.items()}
    label = max(4, *map(len, segs))
    text = next(iter(columns.values()))
    lines = []
    for block in _blocks(len(text), width):
        lines.append(f"{'text':>{label}}  " + "".join(text[i][0] for i in block))
        for name, cols in columns.items():
            lines.append(f"{name:>{label}}  " + "".join("|" if cols[i][1] else " " for i in block))
        lines.append("")
    return "\n".join(lines)


def side_by_side_html(
    segs: dict[str, Segmentation], width: int = 100, title: str = "rltok: side by side"
) -> str:
    """A page with, per model, its chunks (alternating shades, a bar at each end) and under them its
    boundary probability as a heat map, where the model has probabilities of its own."""
    columns = {name: _columns(seg) for name, seg in segs.items()}
    rows = []
    for block in _blocks(len(next(iter(columns.values()))), width):
        for name, cols in columns.items():
            cells = [
                f'<span class="c{shade}{" end" if ends else ""}">{html.escape(ch)}</span>'
                for ch, ends, _, shade in (cols[i] for i in block)
            ]
            rows.append(
                f'<div class="row"><span class="name">{html.escape(name)}</span>{"".join(cells)}</div>'
            )
            if _has_probabilities(segs[name]):
                heat = "".join(
                    f'<span class="p" style="background:rgba(220,60,40,{cols[i][2]:.3f})" '
                    f'title="p={cols[i][2]:.3f}">{html.escape(cols[i][0])}</span>'
                    for i in block
                )
                rows.append(f'<div class="row heat"><span class="name">p</span>{heat}</div>')
        rows.append('<div class="gap"></div>')
    summary = "".join(
        f"<li>{html.escape(name)}: {len(seg.chunks())} chunks "
        f"({len(seg.data) / max(len(seg.chunks()), 1):.2f} bytes per chunk)</li>"
        for name, seg in segs.items()
    )
    label = max(map(len, segs)) + 1
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
.view {{ font-family: monospace; font-size: 15px; line-height: 1.7; white-space: pre; }}
.name {{ display: inline-block; width: {label}ch; color: #555; }}
.c0 {{ background: #cfe3f7; }} .c1 {{ background: #f7e2c4; }}
.end {{ box-shadow: inset -2px 0 0 #1a4; }}
.heat {{ color: #777; }}
.gap {{ height: 0.8em; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<ul>{summary}</ul>
<p>Each model's chunks in alternating shades, a green bar where a chunk ends; the row under a
learned method shows its boundary probability at each character (darker: more likely).</p>
<div class="view">{"".join(rows)}</div>
</body></html>
"""


def _has_probabilities(seg: Segmentation) -> bool:
    """False where the probabilities are only the boundaries themselves (rules, BPE tokens)."""
    return any(p not in (0.0, 1.0) for p in seg.probs)
