"""Portable checkpoints: save_pretrained / from_pretrained round trips, offline, on local directories."""

import json

import pytest
import torch

import rltok
from rltok.cli import main
from rltok.data import embedded_corpus
from rltok.errors import UserError
from rltok.pretrained import build_model


@pytest.mark.parametrize("method", ["rl", "bpe-lm"])
def test_save_pretrained_round_trips_weights_config_and_scores(tmp_path, method):
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--preset",
                "smoke",
                "--quiet",
                "--boundaries",
                method,
                "--max-steps",
                "3",
                "--out",
                str(run),
            ]
        )
        == 0
    )
    model = rltok.load(run)
    export = tmp_path / "export"
    model.save_pretrained(export)
    assert {p.name for p in export.iterdir()} >= {"model.safetensors", "config.json", "README.md"}
    loaded = rltok.from_pretrained(str(export))
    assert type(loaded) is type(model) and loaded.config == model.config and not loaded.training
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    docs = [d[:3000] for d in embedded_corpus().test]
    cfg = model.config.train
    assert rltok.evaluate(loaded, docs, cfg.seq_len) == rltok.evaluate(model, docs, cfg.seq_len)
    assert rltok.load(export).config == model.config  # rltok.load reads exports too


def test_the_model_card_carries_the_run_summary_and_survives_a_re_export(smoke_run, tmp_path):
    model = rltok.load(smoke_run)
    model.save_pretrained(tmp_path / "a")
    card = (tmp_path / "a" / "README.md").read_text()
    summary = json.loads((smoke_run / "summary.json").read_text())
    assert (
        "library_name: rltok" in card
        and f"{summary['val_bpb']:.4f}" in card
        and "| boundaries | rl |" in card
    )
    rltok.from_pretrained(str(tmp_path / "a")).save_pretrained(tmp_path / "b")
    assert (tmp_path / "b" / "README.md").read_text() == card


def test_export_command(smoke_run, tmp_path, capsys):
    assert main(["export", "--checkpoint", str(smoke_run), "--out", str(tmp_path / "x")]) == 0
    assert "from_pretrained" in capsys.readouterr().out
    [r] = rltok.from_pretrained(str(tmp_path / "x")).generate(["To be"], max_bytes=5, seed=0)
    assert len(r.generated) == 5 or r.ended
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert main(["export", "--checkpoint", str(smoke_run), "--out", str(tmp_path / "busy")]) == 2
    assert "holds other files" in capsys.readouterr().err


def test_an_unknown_repo_id_offline_is_one_clear_error():
    with pytest.raises(UserError, match="neither a local directory nor a Hub repo"):
        rltok.from_pretrained("nobody/no-such-rltok-model", local_files_only=True)


def test_weights_from_another_config_are_refused(smoke_run, tmp_path):
    rltok.load(smoke_run).save_pretrained(tmp_path / "e")
    config = json.loads((tmp_path / "e" / "config.json").read_text())
    config["model"]["d_model"] = 32
    (tmp_path / "e" / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="do not fit the architecture"):
        rltok.from_pretrained(str(tmp_path / "e"))


def test_a_model_class_loads_only_its_own_kind(smoke_run, tmp_path):
    from rltok.pretrained import ByteUNetLM, FlatByteLM

    rltok.load(smoke_run).save_pretrained(tmp_path / "u")
    assert isinstance(ByteUNetLM.from_pretrained(tmp_path / "u"), ByteUNetLM)
    with pytest.raises(UserError, match="not a FlatByteLM"):
        FlatByteLM.from_pretrained(tmp_path / "u")


def test_an_export_has_an_inventory(smoke_run, tmp_path, capsys):
    rltok.load(smoke_run).save_pretrained(tmp_path / "x")
    assert (
        main(["inventory", "--checkpoint", str(tmp_path / "x"), "--max-bytes", "3000", "--no-bpe"])
        == 0
    )
    assert "distinct" in capsys.readouterr().out


def test_a_freshly_built_model_saves_and_generates_with_its_full_config(tmp_path):
    # what training builds is what users hold: no checkpoint round trip needed to export it
    cfg = rltok.preset("smoke")
    model = build_model(cfg)
    assert model.config == cfg
    model.save_pretrained(tmp_path / "fresh")
    loaded = rltok.from_pretrained(str(tmp_path / "fresh"))
    assert loaded.config == cfg
    [a] = model.eval().generate(["To be"], max_bytes=8, seed=0)
    [b] = loaded.generate(["To be"], max_bytes=8, seed=0)
    assert a.text == b.text
