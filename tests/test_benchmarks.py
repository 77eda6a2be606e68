"""The analysis scripts under benchmarks/ measure what they claim."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import rltok
from rltok.data import embedded_corpus

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from boundary_value import measure  # noqa: E402


def test_boundary_value_sees_no_worth_in_boundaries_when_the_main_network_is_cut_off(smoke_run):
    docs = embedded_corpus().test
    model = rltok.load(smoke_run)
    connected = measure(model, docs, n_batches=2)
    with torch.no_grad():
        model.up.weight.zero_()  # the main network's output no longer reaches the bytes
    cut = measure(model, docs, n_batches=2)

    assert len(set(cut["bpb_by_segmentation"].values())) == 1
    assert all(
        v["mean"] == 0 and v["standard_error"] == 0 for v in cut["one_more_boundary_nats"].values()
    )
    assert len(set(connected["bpb_by_segmentation"].values())) > 1
    assert any(v["mean"] != 0 for v in connected["one_more_boundary_nats"].values())
    assert cut["return_std_nats"] > 0  # the return still varies: the estimator would chase noise


def test_boundary_value_word_starts_are_the_word_start_rules():
    from boundary_value import forced_segmentations

    ids = rltok.encode("To be,  or\nnot")[None]
    masks = forced_segmentations(ids, 0.2)
    # byte index, BOS dropped
    ends = [i - 1 for i in masks["word start"][0].nonzero().flatten().tolist() if i > 0]
    # T after BOS, b after a space, o after two, n after a newline: the rule's definition (rltok.text)
    assert bytes(b"To be,  or\nnot"[i] for i in ends) == b"Tbon"
    # BOS is always an end
    assert masks["whitespace"][0, 1:].sum() == 4 and masks["word start"][0, 0] == 1


def test_boundary_value_on_gold_words_forces_them_and_reads_the_main_networks_worth(smoke_run):
    from boundary_value import forced_segmentations

    from rltok.data.gold import GOLD_START, gold_codes, without_spaces

    text, ends = without_spaces("我们 去 北京 看 长城 吧 ok go\n".encode() * 40)
    ids = torch.tensor([[rltok.BOS, *text]])
    codes = torch.from_numpy(np.concatenate([[0], gold_codes(ends)]))[None]
    masks = forced_segmentations(ids, 0.2, codes)
    assert torch.equal(masks["gold word starts"][:, 1:].bool(), (codes[:, 1:] & GOLD_START) > 0)
    lead = torch.tensor([[True] + [b < 0x80 or b >= 0xC0 for b in text]])
    assert torch.equal(masks["character starts"].bool(), lead)  # BOS ends a chunk in every mask
    chosen = masks["random character starts 0.2"].bool()
    assert not (chosen & ~lead).any() and 0.1 < chosen[0, 1:].float().mean() < 0.3

    pairs = [without_spaces(doc) for doc in embedded_corpus().test]
    docs, gold = [d for d, _ in pairs], [g for _, g in pairs]
    model = rltok.load(smoke_run)
    found = measure(model, docs, n_batches=2, gold=gold)
    assert set(found["one_more_boundary_nats"]) == {
        "word start",
        "character start inside a word",
        "inside a character",
    }
    bits = found["bpb_by_segmentation"]
    assert found["lean"] == pytest.approx(bits["bos only"] - bits["own"], abs=2e-4)
    with torch.no_grad():
        model.up.weight.zero_()  # no main network: no segmentation is worth anything
    assert measure(model, docs, n_batches=2, gold=gold)["lean"] == 0


def test_imperfect_rule_degrades_the_word_start_rule_as_described():
    from imperfect_rule import LateWordStart, NoisyWordStart, word_starts

    from rltok.boundaries.rules import WordStartBoundaries
    from rltok.config import BoundaryConfig

    ids = torch.tensor([list(embedded_corpus().val[0][:20000])])
    x = torch.zeros(1, ids.size(1), 8)
    exact = WordStartBoundaries(8, BoundaryConfig())(x, ids, None).boundaries.bool()
    assert torch.equal(exact[:, 1:], word_starts(ids)[:, 1:])  # the same rule as the library's

    noisy = NoisyWordStart(8, BoundaryConfig())(
        x, ids, None, noise=torch.rand(ids.shape)
    ).boundaries.bool()
    starts = word_starts(ids)
    recall = (noisy & starts).sum() / starts.sum()
    precision = (noisy & starts).sum() / noisy.sum()
    assert abs(recall - NoisyWordStart.keep) < 0.05 and abs(precision - 0.55) < 0.05
    assert abs(noisy.float().mean() - 0.2) < 0.02

    late = LateWordStart(8, BoundaryConfig())
    late.switch = 2
    late.train()
    first = [late(x, ids, None).boundaries for _ in range(2)]
    assert all(
        abs(b[:, 1:].float().mean() - 0.2) < 0.01 and not torch.equal(b.bool(), exact)
        for b in first
    )
    # the third training step: the rule
    assert torch.equal(late(x, ids, None).boundaries.bool(), exact)
    late.eval()
    late.training_steps = 0
    # evaluation always sees the rule
    assert torch.equal(late(x, ids, None).boundaries.bool(), exact)


def test_imperfect_rule_frozen_is_the_teachers_mode_whatever_the_noise(smoke_run, monkeypatch):
    from imperfect_rule import FrozenMode

    from rltok.config import BoundaryConfig

    teacher = rltok.load(smoke_run).eval()
    assert teacher.config.boundaries.method == "rl"
    monkeypatch.setattr(FrozenMode, "teacher", teacher)
    ids = torch.tensor([list(embedded_corpus().val[0][:300])])
    x = torch.zeros(1, ids.size(1), 8)
    frozen = FrozenMode(8, BoundaryConfig())
    draws = [frozen(x, ids, None, noise=torch.rand(ids.shape)).boundaries for _ in range(2)]
    mode = teacher(ids, noise=torch.full(ids.shape, 0.5)).boundaries
    assert torch.equal(draws[0], draws[1]) and torch.equal(draws[0], mode)
    assert 0 < mode[:, 1:].float().mean() < 1  # a segmentation, not all or nothing
    assert not list(frozen.parameters())  # the teacher is not part of the model it trains


def test_imperfect_rule_consistent_reproduces_a_teacher_that_reads_only_the_last_bytes(monkeypatch):
    """The consistent variant's table, fitted on a teacher that is itself a function of the last two
    bytes (the word-start rule), decides as the teacher does, on text it was not fitted on."""
    from types import SimpleNamespace

    from imperfect_rule import ConsistentMode

    from rltok.boundaries.base import force_first
    from rltok.text import word_starts

    class RuleTeacher(torch.nn.Module):
        config = SimpleNamespace(train=SimpleNamespace(seq_len=128, batch_size=8))

        def forward(self, ids, noise=None):
            return SimpleNamespace(boundaries=force_first(word_starts(ids)))

    monkeypatch.setattr(ConsistentMode, "context", 3)
    monkeypatch.setattr(ConsistentMode, "ends", [])
    monkeypatch.setattr(ConsistentMode, "trusted", [])
    corpus = embedded_corpus()
    assert ConsistentMode.fit(RuleTeacher(), corpus.train, batches=64) > 0.99
    ids = torch.tensor([[256, *corpus.val[0][:2000]]])
    agree = (ConsistentMode.decide(ids)[:, 1:] == word_starts(ids)[:, 1:]).float().mean()
    assert agree > 0.98


def test_scaling_benchmark_measures_the_loader_against_a_step(tmp_path):
    out = tmp_path / "scaling.json"
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).parents[1] / "benchmarks" / "scaling.py"),
            "--only",
            "loader",
            "--rounds",
            "1",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    loader = json.loads(out.read_text())["loader"]
    assert (
        loader["shards"] > 1
        and 0 < loader["share"] == loader["load_seconds_median"] / loader["step_seconds_median"]
    )


def test_pair_curves_reads_each_pair_at_the_steps_both_validated(tmp_path):
    from pair_curves import pair_differences

    def run(name: str, curve: dict[int, float]) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        rows = [{"step": s, "loss": 1.0} for s in curve] + [
            {"step": s, "val_bpb": v} for s, v in curve.items()
        ]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return folder

    a0, b0 = run("a0", {50: 3.0, 100: 2.5}), run("b0", {50: 3.1, 100: 2.4, 150: 2.3})
    a1, b1 = run("a1", {50: 2.9, 100: 2.6}), run("b1", {50: 3.0, 100: 2.7})
    result = pair_differences([(a0, b0), (a1, b1)])
    assert result["pairs"][0]["a_minus_b"] == pytest.approx({50: -0.1, 100: 0.1})
    assert result["by_step"][50] == pytest.approx({"pairs": 2, "a_ahead": 2, "mean": -0.1})
    assert result["by_step"][100] == pytest.approx({"pairs": 2, "a_ahead": 1, "mean": 0.0})
    assert 150 not in result["by_step"]  # only one run of the pair validated there


def test_pair_curves_refuses_a_pair_without_a_colon_in_one_sentence():
    result = subprocess.run(
        [sys.executable, str(Path(__file__).parents[1] / "benchmarks" / "pair_curves.py"), "x"],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "is not RUN_A:RUN_B" in result.stderr and "Traceback" not in result.stderr


def test_tracking_overhead_times_the_trackers_calls_inside_the_tracked_run_only(tmp_path):
    out = tmp_path / "tracking.json"
    script = Path(__file__).parents[1] / "benchmarks" / "tracking_overhead.py"
    args = ["--preset", "smoke", "--steps", "10", "--rounds", "1", "--out", str(out)]
    env = {**os.environ, "WANDB_MODE": "offline"}
    subprocess.run([sys.executable, str(script), *args], check=True, capture_output=True, env=env)
    (r,) = json.loads(out.read_text())["rounds"]
    tracked, plain = r["tracked"], r["plain"]
    assert tracked["tracker_calls_s"] > 10 * plain["tracker_calls_s"]  # plain sends to no tracker
    assert r["in_process_share"] == tracked["tracker_calls_s"] / tracked["train_s"]
    assert tracked["open_close_s"] > 0 and r["ratio"] == tracked["train_s"] / plain["train_s"]


def test_word_signal_auc_and_previous_character_sums():
    from word_signal import auc, previous_character_sum

    positive = torch.tensor([True, False, True, False])
    assert auc(torch.tensor([3.0, 1.0, 4.0, 2.0]), positive) == 1.0
    assert auc(torch.tensor([1.0, 3.0, 2.0, 4.0]), positive) == 0.0
    assert auc(torch.tensor([1.0, 2.0, 4.0, 3.0]), positive) == 0.5
    # characters start at bytes 0, 3 and 4: each start holds the previous character's sum
    values = torch.tensor([1.0, 2.0, 3.0, 10.0, 20.0, 30.0])
    starts = torch.tensor([True, False, False, True, True, False])
    assert previous_character_sum(values, starts).tolist() == [0, 0, 0, 6, 10, 0]


def test_a_head_of_n_bytes_learns_each_strings_share_of_its_teachers_chunk_ends():
    from gold_references import window_keys, window_oracle
    from teacher_ceiling import taught_head

    assert window_keys(b"abc", 2).tolist() == [ord("a"), ord("a") << 8 | ord("b"), 25187]
    text = b"xay" * 50 + b"xby" * 50  # the teacher ends every "y" after "a", and half after "b"
    taught = np.zeros(len(text), dtype=bool)
    taught[2:150:3] = True
    taught[152::6] = True
    head = taught_head(window_keys(text, 2), taught, rate=1 / 6, n=2)
    assert head(b"xayxby", None).tolist() == [False, False, True, False, False, False]
    # taught by gold words, it ends chunks where most occurrences of its n bytes end a word
    gold = bytes(taught.astype(np.uint8))  # a word ends on every taught byte
    oracle = window_oracle([text], [gold], 2, edge=1)
    assert oracle(b"xayxby", None).tolist() == [False, False, True, False, False, False]
