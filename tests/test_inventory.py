"""The learned token inventory: chunk counts and word relations, checked against direct counts."""

import json
import re

import pytest
from conftest import smoke_model

from rltok.cli import main
from rltok.data import embedded_corpus
from rltok.inventory import Chunk, inventory, kind, read_chunks

TEXT = (
    b"Is this a dagger which I see before me,\nThe handle toward my hand? Come, let me clutch thee.\n"
    b"I have thee not, and yet I see thee still.  Art thou not, fatal vision, sensible\n"
    b"Vaulting ambition, which o'er-leaps itself -- I don't know.\n"
) * 4


def _space_like(b: int) -> bool:
    return not (chr(b).isascii() and chr(b).isalnum()) and not 0x80 <= b <= 0xBF


def _whitespace_rule_chunks(data: bytes) -> list[tuple[int, int]]:
    """SpaceByte's causal rule, written out directly: a chunk ends at a space-like byte after one that is not."""
    cuts = [
        i + 1
        for i, b in enumerate(data)
        if _space_like(b) and (i == 0 or not _space_like(data[i - 1]))
    ]
    if not cuts or cuts[-1] != len(data):
        cuts.append(len(data))
    return list(zip([0, *cuts[:-1]], cuts))


def _direct_kind(data: bytes, start: int, end: int, words: set[tuple[int, int]]) -> str:
    core = data[start:end]
    lead = len(core) - len(core.lstrip())
    stripped = core.strip()
    if not stripped:
        return "whitespace"
    if re.search(rb"\s", stripped):
        return "crosses"
    return "word" if (start + lead, start + lead + len(stripped)) in words else "word_piece"


def test_whitespace_inventory_agrees_with_a_direct_count():
    model = smoke_model("whitespace")
    # one window: no chunk cut by its edge
    chunks = read_chunks(model, [TEXT], seq_len=len(TEXT) + 1)
    expected = _whitespace_rule_chunks(TEXT)
    assert [(c.start, c.end) for c in chunks] == expected
    words = {m.span() for m in re.finditer(rb"\S+", TEXT)}
    counts = {k: 0 for k in ("word", "word_piece", "crosses", "whitespace")}
    for start, end in expected:
        counts[_direct_kind(TEXT, start, end, words)] += 1
    report = inventory(chunks, [TEXT], bpe_overlap=False)
    assert report["kinds"] == pytest.approx({k: v / len(expected) for k, v in counts.items()})
    assert counts["word"] > 0 and counts["word_piece"] > 0  # "me," is a word, "don'" a piece
    assert report["chunks"] == len(expected) and report["bytes"] == len(TEXT)
    top = report["top"][0]
    assert TEXT.count(top["chunk"].encode()) >= top["count"]


@pytest.mark.parametrize(
    "chunk,expected",
    [
        ((0, 3), "word"),
        ((0, 2), "word"),
        ((0, 1), "word_piece"),
        ((3, 4), "whitespace"),
        ((4, 7), "word_piece"),
        ((2, 6), "word_piece"),
        ((1, 5), "crosses"),
        ((3, 8), "word"),
        ((4, 9), "word"),
        ((9, 10), "word"),
    ],
)
def test_kind(chunk, expected):
    assert kind(b"Is  this a", Chunk(0, *chunk)) == expected


def test_windows_cut_chunks_only_at_document_ends():
    model = smoke_model("rl")
    docs = embedded_corpus().test
    docs = [docs[0][:1000], docs[1][:333]]
    chunks = read_chunks(model, docs, seq_len=128)
    for d, data in enumerate(docs):
        spans = [(c.start, c.end) for c in chunks if c.doc == d]
        assert all(a < b for a, b in spans) and spans == sorted(spans)
        assert spans[-1][1] == len(data)  # the document's end closes its last chunk
        # contiguous, except where a window's open tail was left out: the next chunk starts a window
        assert all(b == c or (c % 127 == 0 and b < c) for (_, b), (c, _) in zip(spans, spans[1:]))
        assert any(b < c for (_, b), (c, _) in zip(spans, spans[1:]))


def test_inventory_command(smoke_run, tmp_path, capsys):
    png = tmp_path / "lengths.png"
    assert (
        main(
            [
                "inventory",
                "--checkpoint",
                str(smoke_run),
                "--max-bytes",
                "20000",
                "--json",
                "--png",
                str(png),
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert sum(report["kinds"].values()) == pytest.approx(1.0)
    assert 0 <= report["bpe"]["distinct_in_bpe"] <= 1 and png.stat().st_size > 1000
    assert (
        main(
            [
                "inventory",
                "--checkpoint",
                str(smoke_run),
                "--compare",
                str(smoke_run),
                "--max-bytes",
                "5000",
                "--no-bpe",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.count(str(smoke_run)) == 2


def test_inventory_of_a_flat_model_is_refused(tmp_path, capsys):
    out = tmp_path / "flat"
    assert (
        main(
            [
                "train",
                "--preset",
                "smoke",
                "--quiet",
                "--boundaries",
                "flat",
                "--max-steps",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert main(["inventory", "--checkpoint", str(out)]) == 2
    assert "draws no chunks" in capsys.readouterr().err
