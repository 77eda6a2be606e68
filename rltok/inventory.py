"""The token inventory a model learned: its chunks read off a corpus, counted, and set against words
and against a BPE vocabulary of the same size.

Documents are cut into windows of the model's sequence length; each window starts after BOS, as in
evaluation, and a chunk still open at a window's end (cut by the window, not by the model) is left
out unless the document ends there. How a chunk relates to words is read from its text without the
whitespace around it (its core): a `word` is a whole whitespace-delimited word (so "love", "love "
and " love " all count), a `word_piece` lies inside one word without being all of it, a chunk that
`crosses` holds whitespace inside its core or runs past a word's edge, and `whitespace` has no core.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

import torch
from torch import nn

from rltok.boundaries import mode_noise
from rltok.bpe import train_bpe
from rltok.errors import UserError
from rltok.text import WHITESPACE as SPACE

KINDS = ("word", "word_piece", "crosses", "whitespace")


@dataclass
class Chunk:
    """One occurrence: the document, its byte span [start, end)."""

    doc: int
    start: int
    end: int


@torch.no_grad()
def read_chunks(
    model: nn.Module,
    docs: list[bytes],
    seq_len: int,
    greedy: bool = False,
    seed: int = 0,
    batch_size: int = 16,
) -> list[Chunk]:
    """Every chunk the model draws over the documents, read in windows of seq_len (BOS included),
    with sampled boundaries, or p > 0.5 if greedy."""
    if model.tokenizer is not None:  # the BPE-token model: its chunks are its tokens
        bpe = model.tokenizer.get()
        found = []
        for d, data in enumerate(docs):
            ends = bpe.encode(data)[1]
            found += [Chunk(d, start, end) for start, end in zip([0, *ends[:-1]], ends)]
        return found
    if not model.boundary_method.draws_boundaries:
        raise UserError(
            "this checkpoint is a flat byte model: it draws no chunks, so it has no inventory"
        )
    span = seq_len - 1
    windows = [
        (d, s, data[s : s + span]) for d, data in enumerate(docs) for s in range(0, len(data), span)
    ]
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    found = []
    for i in range(0, len(windows), batch_size):
        group = windows[i : i + batch_size]
        ids = torch.full((len(group), span + 1), 32, dtype=torch.long)  # padding is never read back
        ids[:, 0] = 256
        for r, (_, _, piece) in enumerate(group):
            ids[r, 1 : len(piece) + 1] = torch.tensor(list(piece))
        noise = mode_noise(ids.shape) if greedy else torch.rand(ids.shape, generator=generator)
        ends = model(ids.to(device), noise=noise.to(device)).boundaries[:, 1:].cpu()
        for r, (d, start, piece) in enumerate(group):
            cuts = (ends[r, : len(piece)].nonzero()[:, 0] + 1).tolist()
            if start + len(piece) == len(docs[d]) and (not cuts or cuts[-1] != len(piece)):
                cuts.append(len(piece))  # the document ends the last chunk
            found += [Chunk(d, start + a, start + b) for a, b in zip([0, *cuts[:-1]], cuts)]
    return found


def kind(data: bytes, chunk: Chunk) -> str:
    """How a chunk relates to the whitespace-delimited words of its document (see the module doc)."""
    start, end = chunk.start, chunk.end
    while start < end and data[start] in SPACE:
        start += 1
    while end > start and data[end - 1] in SPACE:
        end -= 1
    if start == end:
        return "whitespace"
    if any(b in SPACE for b in data[start:end]):
        return "crosses"
    starts_word = start == 0 or data[start - 1] in SPACE
    ends_word = end == len(data) or data[end] in SPACE
    return "word" if starts_word and ends_word else "word_piece"


def inventory(
    chunks: list[Chunk], docs: list[bytes], top: int = 20, bpe_overlap: bool = True
) -> dict:
    """The figures of `rltok inventory` for these chunks of these documents."""
    if not chunks:
        raise UserError("the documents hold no bytes to read chunks from; pass a non-empty --data")
    counts = collections.Counter(docs[c.doc][c.start : c.end] for c in chunks)
    total = sum(c.end - c.start for c in chunks)
    ranked = counts.most_common()
    kinds = collections.Counter()
    kind_bytes = collections.Counter()
    for c in chunks:
        k = kind(docs[c.doc], c)
        kinds[k] += 1
        kind_bytes[k] += c.end - c.start
    lengths = collections.Counter(c.end - c.start for c in chunks)
    report = {
        "chunks": len(chunks),
        "bytes": total,
        "distinct_chunks": len(counts),
        "bytes_per_chunk": total / len(chunks),
        "top": [
            {
                "chunk": text.decode("utf-8", "replace"),
                "count": n,
                "byte_share": n * len(text) / total,
            }
            for text, n in ranked[:top]
        ],
        "coverage": {
            str(k): sum(n * len(t) for t, n in ranked[:k]) / total for k in (1_000, 10_000)
        },
        "length_histogram": {str(n): lengths[n] for n in sorted(lengths)},
        "kinds": {k: kinds[k] / len(chunks) for k in KINDS},
        "kinds_by_bytes": {k: kind_bytes[k] / total for k in KINDS},
    }
    if bpe_overlap:
        report["bpe"] = bpe_agreement(counts, docs)
    return report


def bpe_agreement(counts: collections.Counter, docs: list[bytes]) -> dict:
    """Overlap with a byte-level BPE of as many tokens as there are distinct chunks, trained on the
    same documents: the share of distinct chunks that are BPE tokens, and of chunk occurrences."""
    bpe = train_bpe(docs, max(257, len(counts)))
    vocab = set(bpe.tokens)
    shared = [t for t in counts if t in vocab]
    # BPE tokens carry their leading space (" love"), chunks often a trailing one ("love "): compare cores too
    cores = {t.strip(SPACE) for t in vocab}
    shared_cores = [t for t in counts if t.strip(SPACE) in cores]
    return {
        "vocab_size": bpe.vocab_size,
        "distinct_in_bpe": len(shared) / len(counts),
        "occurrences_in_bpe": sum(counts[t] for t in shared) / sum(counts.values()),
        "bpe_in_inventory": len(shared) / len(vocab),
        "distinct_cores_in_bpe": len(shared_cores) / len(counts),
    }


def render(name: str, report: dict) -> str:
    """A readable summary of one inventory."""
    lines = [
        f"{name}: {report['chunks']:,} chunks over {report['bytes']:,} bytes "
        f"({report['bytes_per_chunk']:.2f} bytes per chunk), {report['distinct_chunks']:,} distinct",
        f"top 1k chunks cover {report['coverage']['1000']:.1%} of bytes, top 10k {report['coverage']['10000']:.1%}",
        "chunks that are: "
        + ", ".join(f"{k.replace('_', ' ')} {v:.1%}" for k, v in report["kinds"].items()),
    ]
    if "bpe" in report:
        b = report["bpe"]
        lines.append(
            f"BPE of {b['vocab_size']:,} tokens on the same text: {b['distinct_in_bpe']:.1%} of distinct "
            f"chunks are BPE tokens ({b['occurrences_in_bpe']:.1%} of occurrences), "
            f"{b['distinct_cores_in_bpe']:.1%} without the whitespace around them"
        )
    lines += ["", f"{'rank':>4}  {'count':>7}  {'bytes':>6}  chunk"]
    for i, row in enumerate(report["top"], 1):
        lines.append(f"{i:>4}  {row['count']:>7}  {row['byte_share']:>6.2%}  {row['chunk']!r}")
    return "\n".join(lines)


def comparison_table(reports: dict[str, dict]) -> str:
    """One markdown row per model."""
    lines = [
        "| model | bytes/chunk | distinct | top-1k coverage | word | word piece | crosses | whitespace "
        "| in BPE | core in BPE |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in reports.items():
        k = r["kinds"]
        in_bpe = (
            f"{r['bpe']['distinct_in_bpe']:.1%} | {r['bpe']['distinct_cores_in_bpe']:.1%}"
            if "bpe" in r
            else "- | -"
        )
        lines.append(
            f"| {name} | {r['bytes_per_chunk']:.2f} | {r['distinct_chunks']:,} | {r['coverage']['1000']:.1%} "
            f"| {k['word']:.1%} | {k['word_piece']:.1%} | {k['crosses']:.1%} | {k['whitespace']:.1%} | {in_bpe} |"
        )
    return "\n".join(lines)


def plot_lengths(reports: dict[str, dict], path: str) -> None:
    """Chunk-length histograms (share of chunks per length, lengths 1-24) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / len(reports)
    for i, (name, r) in enumerate(reports.items()):
        hist = {int(n): c for n, c in r["length_histogram"].items()}
        xs = list(range(1, 25))
        ax.bar(
            [x + (i - (len(reports) - 1) / 2) * width for x in xs],
            [hist.get(x, 0) / r["chunks"] for x in xs],
            width,
            label=name,
        )
    ax.set_xlabel("chunk length (bytes)")
    ax.set_ylabel("share of chunks")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
