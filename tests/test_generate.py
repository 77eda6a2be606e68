"""Generation: cached decoding equals the full forward pass, for every model that generates."""

import json

import pytest
import torch
from conftest import SMOKE, smoke_model

from rltok.cli import main
from rltok.generate import Utf8Stream, filter_logits, generate
from rltok.layers.blocks import rms_norm
from rltok.model.decoding import decoder_for
from rltok.segment import segment

U_NET = [
    ("rl", {"policy.window": 1}),
    ("rl", {"policy.window": 4}),
    ("rl", {"policy.window": 4, "prior.weight": 1.0}),
    ("rl", {"policy.window": 1, "prior.weight": 1.0, "prior.cue": "surprisal"}),
    ("rl", {"policy.window": 1, "prior.weight": 1.0, "prior.cue": "read-entropy"}),
    ("rl", {"policy.window": 1, "prior.weight": 1.0, "prior.cue": "entropy-drop"}),
    ("rl", {"policy.window": 4, "policy.context": 3}),
    ("rl", {"policy.context": 2, "prior.weight": 1.0, "prior.role": "teach"}),
    ("stride", {}),
    ("whitespace", {}),
    ("word-start", {}),
    ("entropy", {}),
    ("bpe", {}),
    ("nawrot", {}),
    ("hnet", {}),
    ("uniform", {}),
]
LENGTH = 150  # beyond the byte layers' 64-byte attention window


def _text_ids(batch: int = 3) -> torch.Tensor:
    """Rows of real text (word edges for the rules to find) with BOS first."""
    text = (
        b"Is this a dagger which I see before me, the handle toward my hand? Come, let me clutch thee. "
        * 3
    )
    rows = [[256] + list(text[7 * r : 7 * r + LENGTH - 1]) for r in range(batch)]
    return torch.tensor(rows)


def _stepped(model, ids, noise):
    decoder = decoder_for(model, len(ids), context=4096)
    steps = [decoder.step(ids[:, t], noise[:, t]) for t in range(ids.size(1))]
    logits = torch.stack([s.logits for s in steps], dim=1)
    ends = (
        torch.stack([s.boundaries for s in steps], dim=1).long()
        if steps[0].boundaries is not None
        else None
    )
    return logits, ends


@pytest.mark.parametrize("method,fields", U_NET)
@torch.no_grad()
def test_cached_decoding_equals_the_full_forward(method, fields):
    model = smoke_model(method, fields)
    ids, noise = _text_ids(), torch.rand(3, LENGTH)
    if method == "entropy":  # a threshold as training would have left it: the median entropy
        logp = model(ids).early_logits.log_softmax(-1)
        model.boundary.threshold.fill_(-(logp.exp() * logp).sum(-1).median())
    # the cue's statistics as a training batch would have left them
    if fields.get("surprisal_prior"):
        cue = model.boundary.prior.cue(model(ids).early_logits, ids)
        model.boundary.prior.entropy_stats.copy_(torch.stack([cue.mean(), cue.std()]))
    logits, ends = _stepped(model, ids, noise)
    full = model(ids, noise=noise)
    closures = ends[:, 64:].sum(dim=1)
    assert (closures >= 5).all(), (
        "the test needs many chunk closures beyond the window in every row"
    )
    # online it is Bernoulli(rate), not an exact count: compare on its own chunks
    if method == "uniform":
        assert abs(ends.float().mean().item() - 0.2) < 0.08
        full = model(ids, boundaries=ends, noise=noise)
    else:
        assert torch.equal(ends, full.boundaries)
    torch.testing.assert_close(logits, full.logits, atol=1e-4, rtol=0)


@torch.no_grad()
def test_cached_decoding_equals_the_full_forward_for_the_references():
    flat = smoke_model("flat")
    ids = _text_ids()
    logits, _ = _stepped(flat, ids, torch.zeros_like(ids, dtype=torch.float))
    torch.testing.assert_close(logits, flat(ids).logits, atol=1e-4, rtol=0)

    bpe_lm = smoke_model("bpe-lm")
    tokens = torch.randint(0, bpe_lm.bos, (2, 90))
    tokens[:, 0] = bpe_lm.bos
    positions = torch.arange(90).expand_as(tokens)
    full = rms_norm(bpe_lm.blocks(bpe_lm.embed(tokens), positions)) @ bpe_lm.embed.weight.T
    logits, _ = _stepped(bpe_lm, tokens, torch.zeros(2, 90))
    torch.testing.assert_close(logits, full, atol=1e-4, rtol=0)


@torch.no_grad()
def test_the_main_network_context_slides():
    """Beyond `context` bytes the oldest chunks drop out: memory stays flat, and the logits change."""
    model = smoke_model("stride")
    ids, noise = _text_ids(1), torch.rand(1, LENGTH)
    short = decoder_for(model, 1, context=40)
    logits = torch.stack([short.step(ids[:, t], noise[:, t]).logits for t in range(LENGTH)], dim=1)
    full = model(ids, noise=noise).logits
    torch.testing.assert_close(logits[:, :40], full[:, :40], atol=1e-4, rtol=0)
    assert not torch.allclose(logits[:, 60:], full[:, 60:], atol=1e-3)
    assert short.main.k.size(3) == 40 and short.encoder.k.size(3) == model.cfg.attention_window
    wide = decoder_for(model, 1, context=4096)
    for t in range(LENGTH):
        wide.step(ids[:, t], noise[:, t])
    assert wide.main.k.size(3) == 64  # 30 chunks so far: the ring grew no further than it had to


@pytest.mark.parametrize("method", ["rl", "hnet", "flat", "bpe-lm"])
def test_a_batch_of_prompts_of_different_lengths_continues_each_as_alone(method):
    """Greedy: each row of a batch equals the same prompt generated alone, and (bytes) the argmax of
    the full forward over its own text, with the same chunks."""
    model = smoke_model(method)
    prompts = [b"To be, or not to be", b"", b"Is this a dagger which I see before me"]
    results = generate(model, prompts, max_bytes=40, temperature=0, greedy_boundaries=True)
    for r in results:
        [alone] = generate(model, [r.prompt], max_bytes=40, temperature=0, greedy_boundaries=True)
        assert (alone.generated, alone.boundaries) == (r.generated, r.boundaries)
        assert len(r.generated) == 40 or r.ended
        # its chunks are its tokens: the prompt's tokens, then one per generated token
        if method == "bpe-lm":
            assert sum(r.boundaries[: len(r.prompt)]) == len(
                model.tokenizer.get().encode(r.prompt)[0]
            )
            continue
        text = r.prompt + r.generated
        ids = torch.tensor([[256] + list(text)])
        with torch.no_grad():
            out = model(ids, noise=torch.full(ids.shape, 0.5))
        assert out.logits[0, len(r.prompt) : len(text)].argmax(-1).tolist() == list(r.generated)
        if method != "flat":
            assert r.boundaries == out.boundaries[0, 1:].tolist()


def test_generation_is_reproducible_with_a_seed_and_changes_without():
    model = smoke_model("rl")
    a = generate(model, ["Hello", "World!"], max_bytes=30, seed=3)
    b = generate(model, ["Hello", "World!"], max_bytes=30, seed=3)
    c = generate(model, ["Hello", "World!"], max_bytes=30, seed=4)
    assert [(r.generated, r.boundaries) for r in a] == [(r.generated, r.boundaries) for r in b]
    assert [r.generated for r in a] != [r.generated for r in c]


def test_greedy_boundaries_give_the_chunks_of_segment_greedy():
    model = smoke_model("rl")
    [r] = generate(model, ["Is this a dagger"], max_bytes=50, greedy_boundaries=True, seed=1)
    seg = segment(model, r.prompt + r.generated, greedy=True)
    assert r.boundaries == seg.boundaries


def test_top_k_and_top_p_keep_the_most_likely_symbols():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    assert torch.isfinite(filter_logits(logits, 1.0, 2, None)).tolist() == [
        [False, True, False, True]
    ]
    probs = logits.softmax(-1)[0]  # 0.03, 0.64, 0.09, 0.24
    kept = torch.isfinite(filter_logits(logits, 1.0, None, 0.7)).tolist()
    assert kept == [[False, True, False, True]] and probs[1] < 0.7 <= probs[1] + probs[3]
    assert torch.isfinite(filter_logits(logits, 1.0, None, 0.5)).tolist() == [
        [False, True, False, False]
    ]


def test_the_stream_never_splits_a_character_and_marks_after_it():
    out = []
    stream = Utf8Stream(out.append, "|")
    for i, byte in enumerate("aé€b".encode()):
        stream.feed(bytes((byte,)), chunk_ended=i in (0, 1, 4))  # ends inside é and inside €
    stream.close()
    assert "".join(out) == "a|é|€|b"
    assert all("\ufffd" not in piece for piece in out)


def test_generate_command(smoke_run, tmp_path, capsys):
    assert (
        main(
            [
                "generate",
                "--checkpoint",
                str(smoke_run),
                "--prompt",
                "To be",
                "--max-bytes",
                "20",
                "--show-boundaries",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith("T")
    prompts = tmp_path / "prompts.txt"
    # an empty prompt and bytes that are not UTF-8
    prompts.write_bytes(b"First\n\nThird \xff\xfe\n")
    assert (
        main(
            [
                "generate",
                "--checkpoint",
                str(smoke_run),
                "--prompt-file",
                str(prompts),
                "--max-bytes",
                "10",
                "--json",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["prompt"] for r in rows] == ["First", "", "Third \ufffd\ufffd"]
    assert all(len(r["boundaries"]) >= len(r["prompt"].encode()) for r in rows)


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--max-bytes", "0"], "--max-bytes must be at least 1"),
        (["--max-bytes", "-5"], "--max-bytes must be at least 1"),
        (["--temperature", "-0.5"], "--temperature must be 0"),
        (["--top-k", "0"], "--top-k must be at least 1"),
        (["--top-p", "1.5"], "--top-p must lie in (0, 1]"),
        (["--prompt-file", "/no/such/file"], "is not a readable file"),
    ],
)
def test_generate_refuses_bad_settings_in_one_sentence(smoke_run, capsys, flags, message):
    assert main(["generate", "--checkpoint", str(smoke_run), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_an_empty_prompt_file_is_refused(smoke_run, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert main(["generate", "--checkpoint", str(smoke_run), "--prompt-file", str(empty)]) == 2
    assert "is empty" in capsys.readouterr().err


def test_a_prompt_longer_than_the_sequence_length_slides(smoke_run, capsys):
    assert (
        main(
            [
                "generate",
                "--checkpoint",
                str(smoke_run),
                "--prompt",
                "word " * 40,
                "--max-bytes",
                "5",
            ]
        )
        == 0
    )
    assert "sliding context" in capsys.readouterr().err


def test_uniform_says_how_it_decides_online(tmp_path, capsys):
    out = tmp_path / "uniform"
    assert main([*SMOKE, "--boundaries", "uniform", "--max-steps", "2", "--out", str(out)]) == 0
    assert main(["generate", "--checkpoint", str(out), "--max-bytes", "5"]) == 0
    assert "Bernoulli" in capsys.readouterr().err


@torch.no_grad()
def test_the_main_cache_grows_while_rows_close_chunks_at_different_rates():
    model = smoke_model("whitespace")
    # a chunk every 2 bytes: 75, past the first 64 slots
    dense = [256] + list(b"a " * 100)[: LENGTH - 1]
    ids = torch.cat([torch.tensor([dense]), _text_ids(1)])
    noise = torch.rand(2, LENGTH)
    logits, ends = _stepped(model, ids, noise)
    assert ends[0].sum() > 64 > ends[1].sum()
    torch.testing.assert_close(logits, model(ids, noise=noise).logits, atol=1e-4, rtol=0)


def test_rows_end_at_bos_unless_told_not_to():
    model = smoke_model("rl")
    with torch.no_grad():
        # BOS dominates most predictions
        model.head.weight[256] = 50 * model.head.weight[256].sign()
    ended = generate(model, ["a", "b"], max_bytes=30, seed=0)
    assert all(r.ended and len(r.generated) < 30 for r in ended)
    full = generate(model, ["a", "b"], max_bytes=30, seed=0, may_end=False)
    assert all(not r.ended and len(r.generated) == 30 for r in full)


def test_ctrl_c_stops_cleanly_with_what_was_generated():
    model = smoke_model("rl")
    seen = []

    def interrupt_after_ten(row, data, chunk_ended):
        seen.append(data)
        if len(b"".join(seen)) >= 10:
            raise KeyboardInterrupt

    [r] = generate(
        model,
        [""],
        max_bytes=100,
        seed=0,
        on_step=interrupt_after_ten,
        stop_on_interrupt=True,
        may_end=False,
    )
    assert 0 < len(r.generated) < 100 and r.generated == b"".join(seen)
    with pytest.raises(KeyboardInterrupt):  # a library caller who did not ask keeps the exception
        generate(model, [""], max_bytes=100, seed=0, on_step=interrupt_after_ten)


def test_the_bpe_token_model_streams_a_mark_after_each_token():
    model = smoke_model("bpe-lm")
    out = []
    stream = Utf8Stream(out.append, "|")
    [r] = generate(
        model, ["To be, or not"], max_bytes=20, seed=0, on_step=lambda row, d, e: stream.feed(d, e)
    )
    stream.close()
    assert "".join(out).count("|") == sum(r.boundaries)
