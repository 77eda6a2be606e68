"""Corpora larger than memory: shards written by streaming, read through memory maps, trained on exactly
as the same documents in memory; the hub loader's filters on local parquet and JSONL files."""

import json

import numpy as np
import pytest
import torch
from conftest import SMOKE, newest_checkpoint
from safetensors.torch import load_file

from rltok.cli import main
from rltok.data import TrainStream, embedded_corpus, load_corpus
from rltok.data.shards import ShardDocuments, load_sharded, shard_source, write_shards
from rltok.errors import UserError
from rltok.text import BOS


@pytest.fixture(scope="module")
def jsonl(tmp_path_factory):
    """60 documents of varied length (a few hundred bytes to 20 kB) as JSONL."""
    path = tmp_path_factory.mktemp("src") / "docs.jsonl"
    text = b"".join(embedded_corpus().train[:4]).decode("utf-8")
    rng = np.random.default_rng(0)
    with path.open("w") as f:
        start = 0
        for _ in range(60):
            size = int(rng.integers(300, 20000))
            f.write(json.dumps({"text": text[start : start + size]}) + "\n")
            start += size
    return path


def test_sharded_corpus_reads_and_trains_like_the_same_documents_in_memory(jsonl, tmp_path):
    write_shards(shard_source(str(jsonl)), tmp_path / "shards", str(jsonl))
    in_memory, sharded = load_corpus(jsonl), load_corpus(tmp_path / "shards")
    assert isinstance(sharded.train, ShardDocuments)
    for split in ("train", "val", "test"):
        assert list(getattr(sharded, split)) == getattr(in_memory, split)
    assert sharded.describe().split(":")[1] == in_memory.describe().split(":")[1]
    a, b = TrainStream(in_memory.train, 128, 8, seed=1), TrainStream(sharded.train, 128, 8, seed=1)
    for _ in range(20):
        assert all(torch.equal(x, y) for x, y in zip(a.next_batch(), b.next_batch()))
    # and so training on either ends with the same weights
    assert (
        main([*SMOKE, "--data", str(jsonl), "--out", str(tmp_path / "mem"), "--max-steps", "4"])
        == 0
    )
    assert (
        main(
            [
                *SMOKE,
                "--data",
                str(tmp_path / "shards"),
                "--out",
                str(tmp_path / "map"),
                "--max-steps",
                "4",
            ]
        )
        == 0
    )
    wa, wb = (
        load_file(newest_checkpoint(tmp_path / r) / "model.safetensors") for r in ("mem", "map")
    )
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_windows_of_small_shards_are_pieces_of_the_stream_and_never_cross_a_shard(jsonl, tmp_path):
    manifest = write_shards(
        shard_source(str(jsonl)), tmp_path / "shards", str(jsonl), shard_bytes=30_000
    )
    assert len(manifest["splits"]["train"]) > 5
    train = load_sharded(tmp_path / "shards").train
    streams = []  # each shard's documents with BOS after each, as the model reads them
    for part in train.packed():
        starts = np.concatenate([[0], part.ends[:-1]])
        streams.append(
            np.concatenate(
                [
                    np.append(np.asarray(part.data[s:e], dtype=np.int64), BOS)
                    for s, e in zip(starts, part.ends)
                ]
            )
        )
    _, targets = TrainStream(train, 64, 32, seed=0).next_batch()
    for row in targets.numpy():
        assert any(
            np.array_equal(stream[i : i + 64], row)
            for stream in streams
            for i in np.flatnonzero(stream[: len(stream) - 63] == row[0])
        ), "a window is not in any shard"


def test_hub_loader_filters_local_parquet_and_jsonl(tmp_path):
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    texts = ["short", "é" * 3000, "x" * 4096, "y" * 9000]  # 5 B, 6000 B, 4096 B, 9000 B
    pq.write_table(pa.table({"text": texts, "id": list(range(4))}), tmp_path / "web.parquet")
    # FineWeb's rule: at least 4096 bytes, the first 4095 of each (a cut may split a character)
    docs = list(
        shard_source(
            "hf:parquet",
            data_files=[str(tmp_path / "web.parquet")],
            min_bytes=4096,
            keep_bytes=4095,
        )
    )
    assert docs == [("é" * 3000).encode()[:4095], b"x" * 4095, b"y" * 4095]
    # CodeParrot's rule on a JSON file with a `content` field: at least 4096 bytes, kept whole
    with (tmp_path / "code.jsonl").open("w") as f:
        for t in texts:
            f.write(json.dumps({"content": t}) + "\n")
    docs = list(
        shard_source(
            "hf:json", field="content", data_files=[str(tmp_path / "code.jsonl")], min_bytes=4096
        )
    )
    assert docs == [("é" * 3000).encode(), b"x" * 4096, b"y" * 9000]
    with pytest.raises(UserError, match="no string field 'text'"):
        list(shard_source("hf:json", data_files=[str(tmp_path / "code.jsonl")]))


def test_shard_command_from_a_parquet_file_then_train(tmp_path, capsys):
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    text = b"".join(embedded_corpus().train[:4]).decode("utf-8")
    pieces = [text[i : i + 5000] for i in range(0, 200_000, 5000)]
    pq.write_table(pa.table({"text": pieces}), tmp_path / "web.parquet")
    out = tmp_path / "shards"
    assert (
        main(
            [
                "data",
                "shard",
                "hf:parquet",
                str(out),
                "--data-files",
                str(tmp_path / "web.parquet"),
                "--min-bytes",
                "4096",
                "--keep-bytes",
                "4095",
            ]
        )
        == 0
    )
    assert "train 36 docs / 147,420 B" in capsys.readouterr().out
    manifest = json.loads((out / "shards.json").read_text())
    assert manifest["source"] == "hf:parquet" and manifest["splits"]["val"][0]["documents"] == 2
    assert (
        main([*SMOKE, "--data", str(out), "--out", str(tmp_path / "run"), "--max-steps", "2"]) == 0
    )


def test_shard_errors_are_one_sentence_and_leave_nothing_half_written(jsonl, tmp_path, capsys):
    assert main(["data", "shard", str(tmp_path / "missing.txt"), str(tmp_path / "a")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "a").exists()
    (tmp_path / "few.jsonl").write_text(
        "".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(5))
    )
    assert main(["data", "shard", str(tmp_path / "few.jsonl"), str(tmp_path / "b")]) == 2
    assert "too few documents" in capsys.readouterr().err and not (tmp_path / "b").exists()
    # no hidden half-written folder either
    assert sorted(p.name for p in tmp_path.iterdir()) == ["few.jsonl"]
    write_shards(shard_source(str(jsonl)), tmp_path / "c", "x")
    assert main(["data", "shard", str(jsonl), str(tmp_path / "c")]) == 2
    assert "already exists" in capsys.readouterr().err
    shard = tmp_path / "c" / "train" / "00000.bin"
    shard.write_bytes(shard.read_bytes()[:-10])  # truncated
    assert main([*SMOKE, "--data", str(tmp_path / "c"), "--out", str(tmp_path / "run")]) == 2
    assert "does not match shards.json (truncated or edited)" in capsys.readouterr().err
