"""Bytes in: reading, splitting and batching."""

import json

import pytest
import torch

from rltok.data import (
    TrainStream,
    embedded_corpus,
    eval_batches,
    load_corpus,
    read_documents,
)
from rltok.errors import UserError
from rltok.text import BOS, encode


def test_embedded_corpus_is_the_complete_works_split_by_work():
    corpus = embedded_corpus()
    sizes = [sum(map(len, split)) for split in (corpus.train, corpus.val, corpus.test)]
    assert sum(sizes) == 5_057_198
    assert len(corpus.train) + len(corpus.val) + len(corpus.test) == 42
    assert sizes[2] > 200_000 and sizes[1] > 200_000
    assert corpus.test[0].startswith(b"MACBETH") or b"MACBETH" in corpus.test[0][:200]
    train_text = b"".join(corpus.train)
    assert corpus.test[0][5000:5200] not in train_text  # no test line appears in training


def test_invalid_utf8_and_binary_bytes_are_read_as_bytes(tmp_path):
    data = bytes(range(256)) * 8 + b"\xff\xfe invalid \xc3\x28"
    (tmp_path / "raw.bin").write_bytes(data)
    with pytest.warns(UserWarning, match="looks binary"):
        docs = read_documents(tmp_path / "raw.bin")
    assert docs[0][1] == data
    assert encode(data)[1:].tolist() == list(data)


def test_folder_and_jsonl_documents(tmp_path):
    (tmp_path / "a.txt").write_text("alpha " * 50)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("beta " * 50)
    (tmp_path / ".hidden").write_text("never read")
    (tmp_path / "c.jsonl").write_text(
        "\n".join(json.dumps({"text": f"doc {i} é"}) for i in range(3)) + "\n"
    )
    docs = read_documents(tmp_path)
    assert [name for name, _ in docs] == ["a.txt", "c.jsonl:1", "c.jsonl:2", "c.jsonl:3", "b.txt"]
    assert docs[1][1] == "doc 0 é".encode()


def test_malformed_jsonl_names_the_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"text": "ok"}\n{not json\n')
    with pytest.raises(UserError, match="line 2 is not valid JSON"):
        read_documents(path)


def test_single_file_split_is_deterministic_and_disjoint(tmp_path):
    lines = [f"line {i} of a small corpus\n" for i in range(2000)]
    (tmp_path / "one.txt").write_text("".join(lines))
    a, b = load_corpus(tmp_path / "one.txt"), load_corpus(tmp_path / "one.txt")
    assert a.train == b.train and a.test == b.test
    assert a.val and a.test
    assert sum(map(len, a.train + a.val + a.test)) == sum(map(len, lines))
    assert not set(a.test) & set(a.train)


def test_train_windows_start_with_bos_and_shift_by_one():
    stream = TrainStream([b"abcdefghij" * 20, b"xyz" * 30], seq_len=16, batch_size=4, seed=0)
    inputs, targets = stream.next_batch()
    assert inputs.shape == targets.shape == (4, 16)
    assert torch.all(inputs[:, 0] == BOS)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])


def test_eval_batches_predict_every_byte_once():
    docs = [b"a" * 37, b"b" * 5, b"c" * 16]
    batches = eval_batches(docs, seq_len=16, batch_size=3)
    counted = torch.zeros(3)
    for batch in batches:
        counted.index_add_(0, batch.doc_index, batch.valid.sum(dim=1).float())
        assert torch.all(batch.inputs[:, 0] == BOS)
        assert torch.all(batch.targets[~batch.valid] == 0)
    assert counted.tolist() == [37, 5, 16]


def test_a_byte_budget_scores_every_document_in_proportion():
    docs = [b"a" * 10_000, b"b" * 1_000, b"c" * 100]
    batches = eval_batches(docs, seq_len=64, batch_size=8, max_bytes=1_110)
    scored = torch.zeros(3)
    for batch in batches:
        scored.index_add_(0, batch.doc_index, batch.valid.sum(dim=1).float())
    assert scored.tolist() == [1000, 100, 10]
