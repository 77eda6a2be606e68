"""Every row of the README's table of odd inputs: one clear sentence, exit code 2, nothing half-written;
or, where the input is merely unusual, a run that works."""

import hashlib
import json
import shutil

import pytest
from conftest import SMOKE, newest_checkpoint

from rltok.cli import main


def _error_line(capsys, argv):
    code = main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    return code, lines[-1] if lines else ""


def _rehash(checkpoint):
    """Rewrite a checkpoint's manifest after editing it, as another rltok version would have written it."""
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    for name in manifest["files"]:
        manifest["files"][name] = hashlib.sha256((checkpoint / name).read_bytes()).hexdigest()
    (checkpoint / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture
def files(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "no_text").mkdir()
    (tmp_path / "no_text" / "blank.txt").write_bytes(b"")
    (tmp_path / "no_text" / ".hidden").write_bytes(b"hidden files are skipped")
    (tmp_path / "no_field.jsonl").write_text('{"text": "fine"}\n{"title": "no text"}\n')
    (tmp_path / "malformed.jsonl").write_text(
        '{"text": "fine"}\n{"text": "also fine"}\n{"text": broken\n'
    )
    return tmp_path


REFUSED = {
    # case: (argv after `train --preset smoke --quiet`, words the one sentence must contain)
    "nonexistent path": (["--data", "{tmp}/missing.txt"], "missing.txt does not exist"),
    "empty file": (["--data", "{tmp}/empty.txt"], "empty.txt is empty"),
    "folder with no readable files": (["--data", "{tmp}/no_text"], "holds no non-empty files"),
    "jsonl without a text field": (
        ["--data", "{tmp}/no_field.jsonl"],
        "line 2 has no string field",
    ),
    "malformed jsonl line": (["--data", "{tmp}/malformed.jsonl"], "line 3 is not valid JSON"),
    "the gold oracle on text without gold words": (
        ["--boundaries", "gold"],
        "shakespeare has none: prepare one with them",
    ),
    "target rate 0": (["--target-rate", "0"], "strictly between 0 and 1"),
    "target rate 1": (["--target-rate", "1"], "strictly between 0 and 1"),
    "negative target rate": (["--target-rate", "-0.1"], "strictly between 0 and 1"),
    "target rate above 1": (["--target-rate", "1.5"], "strictly between 0 and 1"),
    "window 0": (["--policy-window", "0"], "--policy-window must be an integer from 1"),
    "window longer than a sequence": (
        ["--window", "4096"],
        "--policy-window must be an integer from 1",
    ),
    "negative gamma": (["--gamma", "-0.5"], "--gamma must lie in [0, 1]"),
    "gamma above 1": (["--gamma", "1.01"], "--gamma must lie in [0, 1]"),
    "negative loss weight": (["--policy-weight", "-1"], "loss weights must be non-negative"),
    "group size 0": (["--group-size", "0"], "--group-size must be at least 1"),
    "teach smoothing of one half": (
        ["--prior-role", "teach", "--teach-smoothing", "0.5"],
        "--teach-smoothing must lie in [0, 0.5)",
    ),
    "teach smoothing without a teacher": (["--teach-smoothing", "0.1"], "add --prior-role teach"),
    "negative warm-up": (["--warmup-steps", "-1"], "--warmup-steps must be 0 (none)"),
    "greedy LM segmentation without rollouts": (
        ["--lm-segmentation", "greedy", "--group-size", "1"],
        "rollouts, two or more per text, can",
    ),
    "greedy LM segmentation of a rule": (
        ["--boundaries", "uniform", "--lm-segmentation", "greedy"],
        "use --boundaries rl with --group-size 3 or more",
    ),
    "rate-neutral price of a rule": (
        ["--boundaries", "whitespace", "--rate-neutral"],
        "--rate-neutral prices the RL policy's chunk ends; whitespace has none",
    ),
    "negative group texts": (
        ["--group-texts", "-1"],
        "--group-texts and --group-entropy at least 0",
    ),
    "negative group entropy": (
        ["--group-entropy", "-0.1"],
        "--group-texts and --group-entropy at least 0",
    ),
    "more grouped texts than a batch": (["--group-texts", "5"], "exceeds the 4 texts of a batch"),
    "group size for a rule": (
        ["--group-size", "4", "--boundaries", "uniform"],
        "needs --boundaries rl",
    ),
    "resume with nothing to resume": (["--resume"], "holds no run to resume"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_training_input(files, capsys, case):
    args, needle = REFUSED[case]
    out = files / "run"
    code, line = _error_line(
        capsys, [*SMOKE, *[a.format(tmp=files) for a in args], "--out", str(out)]
    )
    assert code == 2
    assert line.startswith("rltok: error:") and needle in line, line
    assert not out.exists(), "a refused run left files behind"


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["train", "--preset", "huge"], "invalid choice: 'huge' (choose from 'smoke', 'tiny'"),
        (["train", "--boundaries", "magic"], "invalid choice: 'magic'"),
        (["train", "--batch-size", "0"], "must be a positive integer"),
        (["train", "--lr", "nan"], "must be a positive number"),
        (["train", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_wrong_flags_name_the_valid_choices(capsys, argv, needle):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert needle in capsys.readouterr().err


def test_checkpoint_from_another_architecture_or_version(smoke_run, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(newest_checkpoint(smoke_run), other)
    config = json.loads((other / "config.json").read_text())
    config["model"]["d_model"] = 128
    (other / "config.json").write_text(json.dumps(config))
    _rehash(other)
    code, line = _error_line(capsys, ["eval", "--checkpoint", str(other)])
    assert code == 2 and "do not fit the architecture" in line, line

    config["version"] = 99
    (other / "config.json").write_text(json.dumps(config))
    _rehash(other)
    code, line = _error_line(capsys, ["eval", "--checkpoint", str(other)])
    assert code == 2 and "config version 99 is not supported" in line, line


def test_missing_checkpoint_and_segment_file(tmp_path, smoke_run, capsys):
    code, line = _error_line(capsys, ["eval", "--checkpoint", str(tmp_path)])
    assert code == 2 and "holds no rltok checkpoint" in line
    code, line = _error_line(
        capsys, ["segment", "--checkpoint", str(smoke_run), "--file", str(tmp_path / "x")]
    )
    assert code == 2 and "is not a readable file" in line


def test_resume_with_other_data_is_refused(smoke_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(smoke_run, run)
    text = tmp_path / "other.txt"
    text.write_text("Some other text entirely.\n" * 400)
    code, line = _error_line(
        capsys, [*SMOKE, "--out", str(run), "--resume", "--max-steps", "30", "--data", str(text)]
    )
    assert code == 2 and "resume with the same --data" in line, line


def _train_and_eval(tmp_path, capsys, data, steps="3"):
    out = tmp_path / "run"
    assert main([*SMOKE, "--data", str(data), "--max-steps", steps, "--out", str(out)]) == 0
    assert (
        main(
            ["eval", "--checkpoint", str(out), "--data", str(data), "--max-bytes", "4096", "--json"]
        )
        == 0
    )
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_binary_file_trains_with_a_warning(tmp_path, capsys):
    data = tmp_path / "blob.bin"
    data.write_bytes(bytes(range(256)) * 200)
    with pytest.warns(UserWarning, match="looks binary"):
        scores = _train_and_eval(tmp_path, capsys, data)
    assert scores["bpb"] > 0


def test_invalid_utf8_is_trained_on_as_bytes(tmp_path, capsys):
    data = tmp_path / "latin1.txt"
    data.write_bytes("Ça dépend, naïve façade. ".encode("latin-1") * 400 + b"\xff\xfe\xc3\x28" * 50)
    scores = _train_and_eval(tmp_path, capsys, data)
    assert scores["bytes"] > 0 and scores["bpb"] > 0


def test_documents_shorter_than_a_sequence_and_single_bytes(tmp_path, capsys):
    data = tmp_path / "short.jsonl"
    lines = [json.dumps({"text": "x" if i % 3 == 0 else f"line {i}"}) for i in range(200)]
    data.write_text("\n".join(lines) + "\n")
    scores = _train_and_eval(tmp_path, capsys, data)
    assert scores["documents"] == 10 and scores["bytes"] > 0


def test_single_line_of_100_megabytes(tmp_path, capsys):
    data = tmp_path / "line.txt"
    with open(data, "wb") as f:
        for _ in range(100):
            f.write(b"all work and no play makes a dull model " * 26_215)  # 1 MiB-ish, no newline
    assert data.stat().st_size > 100_000_000
    scores = _train_and_eval(tmp_path, capsys, data, steps="2")
    assert scores["bytes"] == 4096
