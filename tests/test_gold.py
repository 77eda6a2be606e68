"""Gold word boundaries: the corpora's annotation, the scores of chunk ends against it, the char rule
and the gold oracle."""

import json

import numpy as np
import pytest
import torch
from conftest import smoke_model

from rltok.data.batches import TrainStream, eval_batches
from rltok.data.gold import (
    GOLD_END,
    GOLD_START,
    gold_codes,
    pku_documents,
    pku_line,
    token_ends,
    without_spaces,
)
from rltok.errors import UserError
from rltok.evaluate import evaluate
from rltok.gold_scores import gold_counts, gold_metrics

PKU = (
    "迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  ——/w  １/m  张/q\n"
    "[中央/n  人民/n  广播/vn  电台/n]nt  记者/n  １/２/m\n"
)


def test_pku_lines_lose_their_tags_and_brackets_and_keep_their_words():
    assert pku_line("[中央/n  人民/n]nt 记者/n  １/２/m") == [
        w.encode() for w in ("中央", "人民", "记者", "１/２")
    ]
    with pytest.raises(ValueError, match="not a PKU word/tag item"):
        pku_line("迈向")
    (text, ends), (second, second_ends) = pku_documents(PKU, lines_per_doc=1)
    assert text.decode() == "迈向充满希望的新世纪——１张\n"
    words = ["迈向", "充满", "希望", "的", "新", "世纪", "——", "１", "张", "\n"]
    assert ends == token_ends([w.encode() for w in words]) and len(ends) == len(text)
    assert second.decode() == "中央人民广播电台记者１/２\n" and second_ends.count(1) == 7
    assert len(pku_documents(PKU, lines_per_doc=200)) == 1


def test_text_without_spaces_keeps_its_words_as_gold_and_newlines_as_tokens():
    text, ends = without_spaces(b"To be,  or\tnot:\r\nto be\n")
    assert text == b"Tobe,ornot:\r\ntobe\n"
    tokens = [b"To", b"be,", b"or", b"not:", b"\r", b"\n", b"to", b"be", b"\n"]
    assert ends == token_ends(tokens)
    codes = gold_codes(ends)
    starts = np.flatnonzero(codes & GOLD_START)
    assert list(starts) == [0, 2, 5, 7, 11, 12, 13, 15, 17]
    assert list(np.flatnonzero(codes & GOLD_END)) == [s - 1 for s in starts[1:]] + [17]


def _reference(chosen, cuts, decided):
    """Token counts by enumeration: gold tokens between consecutive cuts, and those found."""
    tokens = found = 0
    for row in range(len(cuts)):
        at = [t for t in range(cuts.size(1)) if cuts[row, t] and decided[row, t]]
        picked = [t for t in range(cuts.size(1)) if chosen[row, t] and decided[row, t]]
        for a, b in zip(at, at[1:]):
            tokens += 1
            found += a in picked and b in picked and not any(a < p < b for p in picked)
    return tokens, found


@pytest.mark.parametrize("seed", range(5))
def test_token_counts_match_an_enumeration_and_perfect_chunks_score_one(seed):
    gen = torch.Generator().manual_seed(seed)
    ends = (torch.rand(3, 40, generator=gen) < 0.3).to(torch.uint8)
    codes = ends * GOLD_END | torch.nn.functional.pad(ends[:, :-1], (1, 0), value=1) * GOLD_START
    decided = torch.ones(3, 40, dtype=torch.bool)
    decided[:, 0] = False
    decided[2, 30:] = False
    chosen = torch.rand(3, 40, generator=gen) < 0.4
    counts = gold_counts(chosen, codes, decided)
    for e, bit in enumerate((GOLD_END, GOLD_START)):
        tokens, found = _reference(chosen, (codes & bit).bool(), decided)
        assert counts[6 * e + 4 : 6 * e + 6].tolist() == [tokens, found]
    on_ends = gold_metrics(gold_counts((codes & GOLD_END).bool(), codes, decided))
    on_starts = gold_metrics(gold_counts((codes & GOLD_START).bool(), codes, decided))
    assert on_ends["gold_end_f1"] == on_ends["gold_end_token_f1"] == 1.0
    assert on_starts["gold_start_f1"] == on_starts["gold_start_token_f1"] == 1.0
    assert on_ends["gold_token_f1"] == on_starts["gold_token_f1"] == 1.0


def test_every_byte_a_chunk_finds_the_one_byte_words_only():
    ends = token_ends([b"ab", b"c", b"def", b"g"])  # codes of "abcdefg"
    codes = torch.from_numpy(gold_codes(ends).astype(np.int64))[None]
    decided = torch.ones_like(codes, dtype=torch.bool)
    metrics = gold_metrics(gold_counts(torch.ones_like(decided), codes, decided))
    assert metrics["gold_end_recall"] == 1.0 and metrics["gold_end_precision"] == 4 / 7
    # the tokens with both edges seen: c, def, g; of them c and g are one byte long
    assert metrics["gold_end_token_f1"] == pytest.approx(2 * (2 / 6) * (2 / 3) / (2 / 6 + 2 / 3))


@pytest.mark.parametrize("max_bytes", [None, 9])
def test_eval_batches_carry_each_input_bytes_gold_code(max_bytes):
    docs = [b"abcdefghij", b"klmno"]
    ends = [token_ends([b"abc", b"defg", b"hij"]), token_ends([b"kl", b"mno"])]
    batches = eval_batches(docs, seq_len=4, batch_size=3, gold=ends, max_bytes=max_bytes)
    assert sum(int(b.valid.sum()) for b in batches) == (max_bytes or 15)
    for batch in batches:
        for row in range(len(batch.inputs)):
            doc = int(batch.doc_index[row])
            for t in range(1, int(batch.valid[row].sum())):
                byte = int(batch.inputs[row, t])
                offset = docs[doc].index(bytes([byte]))
                assert batch.gold[row, t] == gold_codes(ends[doc])[offset]
            assert batch.gold[row, 0] == 0


def test_train_windows_carry_gold_codes_and_refuse_gold_without_it():
    docs, ends = [b"abcdefghij"] * 3, [token_ends([b"abc", b"defg", b"hij"])] * 3
    stream = TrainStream(docs, seq_len=6, batch_size=4, seed=0, gold=ends)
    inputs, targets, codes = stream.next_batch(gold=True)
    expected = gold_codes(ends[0])
    for row in range(4):
        for t in range(1, 6):
            byte = int(inputs[row, t])
            if byte < 256:
                assert codes[row, t] == expected[docs[0].index(bytes([byte]))]
    plain = TrainStream(docs, seq_len=6, batch_size=4, seed=0)
    assert torch.equal(plain.next_batch()[0], inputs)  # the same draw with or without gold
    with pytest.raises(UserError, match="corpus has none"):
        plain.next_batch(gold=True)


TEXT = "ab é 中文 😀z\n".encode()


def test_the_char_rule_ends_a_chunk_on_every_characters_last_byte_and_decides_alike_online():
    model = smoke_model("char")
    ids = torch.tensor([[256, *TEXT, 0x80, 0xE4]])  # a stray continuation byte, a cut-off character
    ends = model(ids).boundaries[0, 1:].tolist()
    last_bytes = []
    for ch in TEXT.decode():
        last_bytes += [0] * (len(ch.encode()) - 1) + [1]
    assert ends == last_bytes + [1, 0]
    method = model.boundary_method
    state = method.online_state()
    online = [
        bool(method.online(state, None, ids[:, t], None, torch.zeros(1), t).boundaries[0])
        for t in range(ids.size(1))
    ]
    assert online == [True, *map(bool, ends)]


def test_the_gold_oracle_ends_chunks_on_gold_word_starts_and_refuses_text_without_gold():
    model = smoke_model("gold")
    docs = ["迈向充满希望的新世纪\n".encode()] * 2
    ends = [
        token_ends([w.encode() for w in ("迈向", "充满", "希望", "的", "新", "世纪", "\n")])
    ] * 2
    scores = evaluate(model, docs, seq_len=64, batch_size=2, gold=ends)
    assert scores["gold_start_f1"] == scores["gold_start_token_f1"] == 1.0
    assert scores["rate"] == pytest.approx(6 / (len(docs[0]) - 1))
    with pytest.raises(UserError, match="this text has none"):
        evaluate(model, docs, seq_len=64, batch_size=2)
    with pytest.raises(UserError, match="cannot generate"):
        model.boundary_method.online(None, None, torch.zeros(1), None, torch.zeros(1), 0)
    # a learned method's scores carry the same gold figures, computed, not copied
    rl = evaluate(smoke_model("rl"), docs, seq_len=64, batch_size=2, gold=ends)
    assert set(rl) >= {"gold_end_f1", "gold_start_token_f1", "gold_token_f1"}
    assert json.dumps(rl)


def test_the_gold_end_oracle_ends_chunks_on_gold_word_ends():
    docs = ["迈向充满希望的新世纪\n".encode()] * 2
    words = [w.encode() for w in ("迈向", "充满", "希望", "的", "新", "世纪", "\n")]
    ends = [token_ends(words)] * 2
    scores = evaluate(smoke_model("gold-end"), docs, seq_len=64, batch_size=2, gold=ends)
    assert scores["gold_end_f1"] == scores["gold_end_token_f1"] == 1.0
    assert scores["gold_start_f1"] < 0.2
    # the same text through the start oracle: the two hand over different edges of the same words
    start = evaluate(smoke_model("gold"), docs, seq_len=64, batch_size=2, gold=ends)
    assert start["gold_end_f1"] < 0.2


def test_the_compare_report_has_a_gold_table_only_where_rows_have_gold():
    from rltok.compare.report import gold_section

    row = {"name": "char", "seeds": [0], "bpb": 3.1, "rate": 0.33}
    assert gold_section([row]) == ""
    scores = {f"gold_{e}_{k}": 0.5 for e in ("end", "start") for k in ("precision", "recall", "f1")}
    scores |= {"gold_end_token_f1": 0.25, "gold_start_token_f1": 0.75, "gold_token_f1": 0.75}
    table = gold_section([row | scores, {**row, "name": "flat"}])
    assert "| char | 1 | 3.1000 | 0.330 | 0.500 / 0.500 / 0.500 | 0.250 |" in table
    assert "flat" not in table
