"""Side-by-side segmentations: every model's line holds the same characters, cut where that model cuts."""

import re
import shutil
import subprocess

import pytest
from conftest import smoke_model

from rltok.cli import main
from rltok.segment import segment
from rltok.side_by_side import side_by_side_ansi, side_by_side_html, side_by_side_plain

TEXT = "Is this a dagger which I see before me,\nThe handle toward my hand? Come, let me clutch thee. é€"


def _char_spans() -> list[tuple[int, int]]:
    """The byte span of each character of TEXT."""
    offsets = [0]
    for ch in TEXT:
        offsets.append(offsets[-1] + len(ch.encode()))
    return list(zip(offsets, offsets[1:]))


def _segs():
    return {
        "rl": segment(smoke_model("rl"), TEXT, seed=1),
        "whitespace": segment(smoke_model("whitespace"), TEXT),
    }


def test_plain_marks_each_models_chunk_ends_under_the_same_characters():
    segs = _segs()
    lines = side_by_side_plain(segs, width=40).split("\n")
    text_rows = [line[12:] for line in lines if line.startswith(f"{'text':>10}  ")]
    assert "".join(text_rows).replace("⏎", "\n") == TEXT
    for name, seg in segs.items():
        marks = "".join(
            line[12:].ljust(40)[:40] for line in lines if line.startswith(f"{name:>10}  ")
        )
        expected = ["|" if any(seg.boundaries[a:b]) else " " for a, b in _char_spans()]
        # a mark under each character a chunk ends in
        assert marks.rstrip() == "".join(expected).rstrip()


def test_ansi_lines_hold_the_same_text_for_every_model():
    segs = _segs()
    out = side_by_side_ansi(segs, width=30)
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in out.split("\n") if line]
    by_model = {
        name: "".join(line[12:] for line in plain if line[:10].strip() == name) for name in segs
    }
    assert len(set(by_model.values())) == 1 and by_model["rl"].replace("⏎", "\n") == TEXT


def test_html_has_a_row_per_model_and_a_heat_map_for_the_learned_one():
    segs = _segs()
    page = side_by_side_html(segs, width=1000)
    assert (
        page.count('<span class="name">rl</span>') == 1
        and page.count('<span class="name">whitespace</span>') == 1
    )
    # the rule has no probabilities of its own
    assert page.count('<span class="name">p</span>') == 1
    ends = sum(any(s.boundaries[a:b]) for s in segs.values() for a, b in _char_spans())
    assert page.count(' end"') == ends > 0


@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="Debian's chromium is not installed (.ci/run installs it)",
)
def test_the_html_renders_in_a_headless_browser(smoke_run, tmp_path, capsys):
    assert (
        main(
            [
                "segment",
                "--checkpoint",
                str(smoke_run),
                "--compare",
                str(smoke_run),
                "--text",
                TEXT,
                "--format",
                "html",
            ]
        )
        == 0
    )
    page = tmp_path / "side.html"
    page.write_text(capsys.readouterr().out)
    browser = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,600"]
    dom = subprocess.run(
        [*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    # both models, as parsed
    assert dom.count('class="row"') == 2 and dom.count('class="row heat"') == 2
    shot = tmp_path / "side.png"
    subprocess.run(
        [*browser, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_segment_compare_command(smoke_run, capsys):
    assert (
        main(
            [
                "segment",
                "--checkpoint",
                str(smoke_run),
                "--compare",
                str(smoke_run),
                "--text",
                TEXT,
                "--format",
                "plain",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "smoke (2)" in out and out.count("text  ") >= 2
