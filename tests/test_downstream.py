"""Downstream evaluation: scoring, causality of the context's chunks, tasks, bigbench, lm-eval."""

import hashlib
import io
import json
import math
import sys
import tarfile

import pytest
import torch
from conftest import smoke_model

from rltok.cli import main
from rltok.downstream import bigbench, load_task, read_task, score_items
from rltok.downstream.agreement import agreement_items
from rltok.downstream.score import Request, _noise, _rows, continuation_nll, item_requests
from rltok.downstream.tasks import Item
from rltok.errors import UserError
from rltok.objective import next_byte_nll
from rltok.text import BOS

SEQ_LEN = 128  # the smoke preset's
CONTEXT = b"Thou art the king, and I thy servant;"


def _direct_nll(model, context: bytes, continuation: bytes, key: int) -> float:
    """The continuation's loss from one plain forward pass of BOS + context + continuation."""
    text = context + continuation
    targets = torch.tensor([list(text)])
    inputs = torch.cat([torch.tensor([[BOS]]), targets[:, :-1]], dim=1)
    noise = _noise(key, 0, 0, 0, len(text))[None]
    with torch.no_grad():
        out = (
            model(inputs, targets=targets, valid=torch.ones_like(targets, dtype=torch.bool))
            if model.tokenizer is not None
            else model(inputs, noise=noise)
        )
    nll = (
        out.nll
        if out.nll is not None
        else next_byte_nll(out.logits, targets, torch.ones_like(targets, dtype=torch.bool))
    )
    return float(nll[0, len(context) :].sum())


@pytest.mark.parametrize("method", ["rl", "whitespace", "hnet", "flat"])
def test_a_continuation_is_scored_as_in_a_plain_forward_pass_whatever_the_batch(method):
    model = smoke_model(method)
    pairs = [
        (CONTEXT, b" speak."),
        (b"", b"To be, or not to be"),
        (CONTEXT * 2, b" I come, my lord, I come."),
    ]
    requests = [Request(c + s, len(c), key) for key, (c, s) in enumerate(pairs)]
    alone = [
        n for n, _ in continuation_nll(model, requests, SEQ_LEN, batch_size=1, precision="fp32")
    ]
    batched = [
        n for n, _ in continuation_nll(model, requests, SEQ_LEN, batch_size=8, precision="fp32")
    ]
    direct = [_direct_nll(model, c, s, key) for key, (c, s) in enumerate(pairs)]
    assert alone == pytest.approx(direct, rel=1e-4)
    assert batched == pytest.approx(direct, rel=1e-4)


def test_a_continuation_longer_than_the_window_is_scored_once_in_windows():
    rows = _rows([Request(b"x" * 10 + b"y" * 300, 10, 0)], SEQ_LEN, samples=2)
    scored = sorted(i for row in rows if row.sample == 0 for i in range(row.scored, row.end))
    assert scored == list(range(10, 310))
    assert all(row.end - row.start <= SEQ_LEN for row in rows) and {row.sample for row in rows} == {
        0,
        1,
    }
    model = smoke_model("rl")
    request = [Request(b"ab " * 50 + b"cd " * 80, 150, 0)]
    ((one, _),) = continuation_nll(model, request, SEQ_LEN, batch_size=1, precision="fp32")
    ((two, _),) = continuation_nll(model, request, SEQ_LEN, batch_size=4, precision="fp32")
    assert one == pytest.approx(two, rel=1e-5) and one > 0


def test_the_context_is_chunked_the_same_whichever_option_follows():
    model = smoke_model("rl")
    item = Item(
        ((CONTEXT.decode(), " speak."), (CONTEXT.decode(), " are silent, and the night is long.")),
        0,
    )
    n = len(CONTEXT)

    def boundaries(request, key):
        targets = torch.tensor([list(request.text)])
        inputs = torch.cat([torch.tensor([[BOS]]), targets[:, :-1]], dim=1)
        with torch.no_grad():
            return model(inputs, noise=_noise(key, 0, 0, 0, len(request.text))[None]).boundaries[0]

    first, second = (boundaries(r, r.key) for r in item_requests([item], SEQ_LEN))
    # decisions at BOS and at every context byte read only the context
    assert torch.equal(first[: n + 1], second[: n + 1])
    assert 0 < int(first[1 : n + 1].sum()) < n  # sampled, not all or nothing
    # with other noise the context's chunks change: the equality above is not a constant policy
    assert not torch.equal(
        first[: n + 1], boundaries(item_requests([item], SEQ_LEN)[0], 7)[: n + 1]
    )


def test_an_items_contexts_lose_the_same_oldest_bytes():
    long_context = "a" * 200
    item = Item(((long_context, " b"), (long_context, " bbbbbbbb")), 0)
    short, long = item_requests([item], SEQ_LEN)
    assert (
        len(long.text) == SEQ_LEN
        and short.text[: short.scored_from] == long.text[: long.scored_from]
    )


def test_the_bpe_token_model_tokenizes_the_continuation_apart_from_its_context():
    model = smoke_model("bpe-lm")
    bpe = model.tokenizer.get()
    context, options = b"the kin", [b"g is here", b"gdom falls"]
    contexts_tokens = []
    for option in options:
        targets = torch.tensor([list(context + option)])
        valid = torch.ones_like(targets, dtype=torch.bool)
        tokens, last_byte, real = model.tokenize(targets, valid, torch.tensor([len(context)]))
        before = last_byte[0] < len(context)
        contexts_tokens.append(tokens[0][before].tolist())
        assert tokens[0][~before].tolist() == bpe.encode(option)[0]
    assert contexts_tokens[0] == contexts_tokens[1] == bpe.encode(context)[0]
    # and the scores follow the same path as the byte models
    requests = [Request(context + option, len(context), 0) for option in options]
    scores = continuation_nll(model, requests, SEQ_LEN, precision="fp32")
    assert all(nll > 0 and greedy is False for nll, greedy in scores)


def test_accuracy_and_the_answers_bits_per_byte_follow_from_the_scores():
    model = smoke_model("rl")
    items = agreement_items()[:12]
    result = score_items(model, items, SEQ_LEN, precision="fp32")
    nll = [
        n
        for n, _ in continuation_nll(
            model, item_requests(items, SEQ_LEN), SEQ_LEN, precision="fp32"
        )
    ]
    pairs = [nll[2 * i : 2 * i + 2] for i in range(len(items))]
    hits = [
        float(min(range(2), key=lambda o: p[o]) == item.answer) for p, item in zip(pairs, items)
    ]
    acc = sum(hits) / len(hits)
    assert result["acc"] == pytest.approx(acc)
    assert result["acc_se"] == pytest.approx(math.sqrt(acc * (1 - acc) / (len(items) - 1)))
    answer_bytes = sum(len(item.options[item.answer][1].encode()) for item in items)
    answer_bits = sum(p[item.answer] for p, item in zip(pairs, items)) / math.log(2)
    assert result["bpb"] == pytest.approx(answer_bits / answer_bytes)
    assert result["bpb_se"] > 0 and result["chance"] == 0.5 and result["items"] == 12


def test_agreement_items_are_minimal_pairs_with_balanced_answers():
    items = agreement_items()
    assert len(items) == 320 and agreement_items() == items
    assert 0.4 < sum(item.answer for item in items) / len(items) < 0.6
    for item in items:
        (context, a), (other, b) = item.options
        assert context == other and a != b
        assert [w for w in a.split() if w not in b.split()] and len(
            set(a.split()) ^ set(b.split())
        ) == 2
    right = [
        item.options[item.answer][1].split()[0]
        for item in items
        if item.options[0][0] == "The kings"
    ]
    assert set(right) == {"are", "were", "have", "speak", "come", "know", "love", "sleep"}


def _write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize(
    "line, reason",
    [
        ('{"context": "a", "options": ["b", "c"], "answer": 2}', "answer"),
        ('{"context": "a", "options": ["b"], "answer": 0}', "at least two"),
        ('{"context": "a", "options": ["b", ""], "answer": 0}', "empty"),
        ('{"question": "a"}', "needs"),
        ("not json", "Expecting value"),
    ],
)
def test_a_malformed_item_names_the_file_and_line(tmp_path, line, reason):
    path = _write_lines(
        tmp_path / "task.jsonl", ['{"context": "a", "options": ["b", "c"], "answer": 1}', line]
    )
    with pytest.raises(UserError, match=rf"task.jsonl line 2 is not a valid item \(.*{reason}"):
        read_task(path)


def test_task_files_of_both_forms_load(tmp_path):
    path = _write_lines(
        tmp_path / "mine.jsonl",
        [
            '{"context": "The king", "options": [" is", " are"], "answer": 0}',
            '{"contexts": ["The king", "The kings"], "continuation": " is here.", "answer": 0}',
            "",
        ],
    )
    first, second = load_task(str(path))
    assert first.options == (("The king", " is"), ("The king", " are"))
    assert second.options == (("The king", " is here."), ("The kings", " is here."))


def test_eval_downstream_refuses_bad_input_in_one_sentence(
    smoke_run, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("RLTOK_DATA", str(tmp_path / "cache"))
    assert main(["eval-downstream", "--checkpoint", str(smoke_run), "--tasks", "piqa"]) == 2
    assert (
        "unknown task 'piqa': the tasks here are agreement (or pass a .jsonl file); `rltok data prepare "
        "bigbench`" in capsys.readouterr().err
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert main(["eval-downstream", "--checkpoint", str(smoke_run), "--tasks", str(empty)]) == 2
    assert "holds no items" in capsys.readouterr().err
    for limit in ("0", "-3"):
        with pytest.raises(SystemExit):
            main(["eval-downstream", "--checkpoint", str(smoke_run), "--limit", limit])
        assert "--limit: must be a positive integer" in capsys.readouterr().err


def _task_json(examples, **fields):
    return json.dumps({"name": "t", "examples": examples, **fields}).encode()


def _fake_sdist(path):
    """A small stand-in for the bigbench sdist: every task the preparer reads, a few examples each."""
    two = [
        {
            "input": 'Which order: a " big red ball " b " red big ball " ?',
            "target_scores": {"a": 1, "b": 0},
        },
        {
            "input": 'Which order: a " old wood box " b " wood old box " ?',
            "target_scores": {"a": 1, "b": 0},
        },
        {"input": "a tie", "target_scores": {"a": 1, "b": 1}},
    ]
    social = [
        {"input": "Tracy went home. Why?", "target_scores": {"tired": 1, "hungry": 0, "lost": 0}}
    ]
    twin = {
        "input": "Context Word: rats.",
        "target": [
            "Sentence 1: The rats fled their holes for the open spaces since the _ were crowded. \nAnswer1: holes. \n"
            "Sentence 2: The rats fled their holes for the open spaces since the _ were roomy. \nAnswer2: spaces."
        ],
    }
    members = {
        name: _task_json(two, append_choices_to_input=False) for name in bigbench.MULTIPLE_CHOICE
    }
    members["social_iqa"] = _task_json(social)
    members[bigbench.WINOGRANDE] = _task_json([twin, {"input": "x", "target": ["no twins here"]}])
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {
            "bigbench-1.0.0/setup.py": b"",
            **{bigbench.MEMBER.format(k): v for k, v in members.items()},
        }.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_prepare_bigbench_extracts_the_tasks_and_eval_downstream_reads_them(
    smoke_run, tmp_path, monkeypatch, capsys
):
    archive = _fake_sdist(tmp_path / "bigbench-1.0.0.tar.gz")
    monkeypatch.setattr(bigbench, "_pip_download", lambda requirement, downloads: archive)
    cache = tmp_path / "cache"
    assert main(["data", "prepare", "bigbench", "--cache", str(cache)]) == 0
    assert "hyperbaton" in capsys.readouterr().out
    folder = cache / "bigbench"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["archive_sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    for name, entry in manifest["tasks"].items():
        assert (
            hashlib.sha256((folder / f"{name}.jsonl").read_bytes()).hexdigest() == entry["sha256"]
        )
    assert manifest["tasks"]["hyperbaton"]["items"] == 2  # the tie is left out
    hyper = load_task("hyperbaton", cache)[0]
    assert hyper.options[0] == ('Q: Which order: a " big red ball " b " red big ball " ?\nA: ', "a")
    social = load_task("social_iqa", cache)[0]
    assert social.options[0][0].endswith(
        "?\n  choice: tired\n  choice: hungry\n  choice: lost\nA: "
    )
    assert social.answer == 0
    first, second = load_task("winogrande", cache)
    assert first.options == (
        ("The rats fled their holes for the open spaces since the holes", " were crowded."),
        ("The rats fled their holes for the open spaces since the spaces", " were crowded."),
    )
    assert (first.answer, second.answer) == (0, 1) and second.options[0][1] == " were roomy."

    assert (
        main(
            [
                "eval-downstream",
                "--checkpoint",
                str(smoke_run),
                "--tasks",
                "hyperbaton,winogrande,agreement",
                "--limit",
                "4",
                "--cache",
                str(cache),
                "--json",
            ]
        )
        == 0
    )
    results = json.loads(capsys.readouterr().out)
    assert [results[t]["items"] for t in ("hyperbaton", "winogrande", "agreement")] == [2, 2, 4]
    assert all(0 <= r["acc"] <= 1 and r["bpb"] > 0 for r in results.values())

    (folder / "hyperbaton.jsonl").write_text(
        '{"context": "", "options": ["a", "b"], "answer": 0}\n'
    )
    assert (
        main(
            [
                "eval-downstream",
                "--checkpoint",
                str(smoke_run),
                "--tasks",
                "hyperbaton",
                "--cache",
                str(cache),
            ]
        )
        == 2
    )
    assert "no longer matches the sha256" in capsys.readouterr().err


def test_eval_downstream_prints_a_table(smoke_run, capsys):
    assert (
        main(["eval-downstream", "--checkpoint", str(smoke_run), "--limit", "6", "--samples", "2"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| task | items | acc |") and lines[2].startswith(
        "| agreement | 6 | "
    )


def test_the_lm_eval_harness_scores_as_rltok_does(smoke_run, tmp_path, monkeypatch):
    lm_eval = pytest.importorskip("lm_eval", reason="the eval extra is not installed")
    from lm_eval.tasks import TaskManager

    import rltok.downstream.harness  # noqa: F401  (registers the model)
    from rltok.checkpoint import load
    from rltok.generate import generate

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    items = agreement_items()[:8]
    _write_lines(tmp_path / "mc.jsonl", [json.dumps(item.to_json()) for item in items])
    texts = [
        "To be, or not to be, that is the question.",
        "Now is the winter of our discontent " * 6,
    ]
    _write_lines(tmp_path / "text.jsonl", [json.dumps({"text": t}) for t in texts])
    _write_lines(tmp_path / "gen.jsonl", [json.dumps({"prompt": "KING. ", "answer": "x"})])
    common = "test_split: test\ndataset_path: json\n"
    (tmp_path / "mc.yaml").write_text(
        f"task: rltok_mc\n{common}dataset_kwargs: {{data_files: {{test: {tmp_path / 'mc.jsonl'}}}}}\n"
        "output_type: multiple_choice\ndoc_to_text: '{{context}}'\ndoc_to_choice: '{{options}}'\n"
        "doc_to_target: '{{answer}}'\ntarget_delimiter: ''\nmetric_list: [{metric: acc}]\n"
    )
    (tmp_path / "text.yaml").write_text(
        f"task: rltok_text\n{common}dataset_kwargs: {{data_files: {{test: {tmp_path / 'text.jsonl'}}}}}\n"
        "output_type: loglikelihood_rolling\ndoc_to_text: ''\ndoc_to_target: '{{text}}'\n"
        "metric_list: [{metric: bits_per_byte}]\n"
    )
    (tmp_path / "gen.yaml").write_text(
        f"task: rltok_gen\n{common}dataset_kwargs: {{data_files: {{test: {tmp_path / 'gen.jsonl'}}}}}\n"
        "output_type: generate_until\ndoc_to_text: '{{prompt}}'\ndoc_to_target: '{{answer}}'\n"
        "generation_kwargs: {until: ['\\n', 'e'], max_gen_toks: 12}\nmetric_list: [{metric: exact_match}]\n"
    )
    out = lm_eval.simple_evaluate(
        model="rltok",
        model_args=f"checkpoint={smoke_run},greedy=True",
        tasks=["rltok_mc", "rltok_text", "rltok_gen"],
        log_samples=True,
        task_manager=TaskManager(include_path=str(tmp_path)),
    )
    results = out["results"]
    model = load(smoke_run)
    ours = score_items(model, items, SEQ_LEN, greedy=True, precision=model.config.train.precision)
    assert results["rltok_mc"]["acc,none"] == pytest.approx(ours["acc"])
    requests = [Request(t.encode(), 0, i) for i, t in enumerate(texts)]
    nll = [
        n
        for n, _ in continuation_nll(
            model, requests, SEQ_LEN, greedy=True, precision=model.config.train.precision
        )
    ]
    bpb = sum(nll) / math.log(2) / sum(len(t.encode()) for t in texts)
    assert results["rltok_text"]["bits_per_byte,none"] == pytest.approx(bpb, rel=1e-5)
    generated = generate(model, ["KING. "], max_bytes=12, temperature=0.0, greedy_boundaries=True)[
        0
    ].text
    expected = generated.split("\n")[0].split("e")[0]
    assert out["samples"]["rltok_gen"][0]["resps"] == [[expected]]


def test_the_lm_eval_command_without_the_extra_is_one_sentence(monkeypatch, capsys):
    from rltok.cli import lm_eval_main

    # as if `pip install 'rltok[eval]'` had not run
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    monkeypatch.setitem(sys.modules, "lm_eval.api.model", None)
    monkeypatch.delitem(sys.modules, "rltok.downstream.harness", raising=False)
    assert lm_eval_main() == 2
    assert "needs lm-eval; install it with `pip install 'rltok[eval]'`" in capsys.readouterr().err
