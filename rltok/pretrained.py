"""The models users hold: a network of rltok.model plus what it can do besides its forward pass:
generate, and travel as a portable checkpoint in the Hugging Face Hub layout. `build_model(cfg)`
makes one (fresh for training, with its full config); `model.save_pretrained(DIR)` writes
model.safetensors, the rltok config.json and a model card (README.md) with the run's summary;
`rltok.from_pretrained(DIR_OR_REPO_ID)` loads one back, and users with a network can
`model.push_to_hub(REPO_ID)`, all through huggingface_hub's model mixin.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from huggingface_hub import ModelCard, ModelCardData, ModelHubMixin, hf_hub_download
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from rltok import boundaries
from rltok.config import Config
from rltok.errors import UserError
from rltok.generate import generate
from rltok.model import BPETokenTransformer, ByteUNet, FlatByteTransformer

WEIGHTS, CONFIG = "model.safetensors", "config.json"
CARD = """---
{{ card_data }}
---

# {{ title }}

A byte-level language model trained with rltok: {{ description }}.

| | |
|---|---|
{% for key, value in facts %}| {{ key }} | {{ value }} |
{% endfor %}
```python
import rltok
model = rltok.from_pretrained("{{ model_id }}")
[result] = model.generate(["To be, or not to be"], max_bytes=200)
print(result.text)
```
"""
SUMMARY = "run_summary.json"  # the run's figures, kept with an export so a re-export keeps its card


class PretrainedModel(
    ModelHubMixin,
    library_name="rltok",
    tags=["byte-level", "tokenizer-free", "rltok"],
    model_card_template=CARD,
):
    """Mixed into every rltok model: generate, save_pretrained, from_pretrained and push_to_hub."""

    def _save_pretrained(self, save_directory: Path) -> None:
        save_file(weights_of(self), save_directory / WEIGHTS)
        (save_directory / CONFIG).write_text(self.config.to_json())
        (save_directory / SUMMARY).write_text(
            json.dumps(getattr(self, "run_summary", {}) or {}, indent=1)
        )

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: str | Path,
        *,
        revision: str | None = None,
        cache_dir: str | Path | None = None,
        force_download: bool = False,
        local_files_only: bool = False,
        token: str | bool | None = None,
        **kwargs,
    ):
        """The model in a save_pretrained directory or a Hub repo (the mixin's signature; the config
        is rltok's own, so the mixin's reading of it into constructor arguments is skipped)."""
        model = cls._from_pretrained(
            model_id=str(pretrained_model_name_or_path),
            revision=revision,
            cache_dir=cache_dir,
            force_download=force_download,
            local_files_only=local_files_only,
            token=token,
        )
        if not isinstance(model, cls):
            raise UserError(
                f"{pretrained_model_name_or_path} holds a {type(model).__name__}, not a {cls.__name__}; "
                "load it with rltok.from_pretrained"
            )
        return model

    @classmethod
    def _from_pretrained(
        cls,
        *,
        model_id: str,
        revision: str | None,
        cache_dir: str | Path | None,
        force_download: bool,
        local_files_only: bool,
        token: str | bool | None,
        **kwargs,
    ):
        if Path(model_id).is_dir():
            directory = Path(model_id)
        else:  # a repo id: fetch the files into the local cache
            fetch = dict(
                repo_id=model_id,
                revision=revision,
                cache_dir=cache_dir,
                force_download=force_download,
                local_files_only=local_files_only,
                token=token,
            )
            try:
                directory = Path(hf_hub_download(filename=CONFIG, **fetch)).parent
                hf_hub_download(filename=WEIGHTS, **fetch)
            # offline, a typo, a private repo: every cause means the same to the user
            except Exception as e:
                raise UserError(
                    f"{model_id} is neither a local directory nor a Hub repo that can be downloaded "
                    f"({e.__class__.__name__}); pass a directory written by save_pretrained, or "
                    "a repo id with network access"
                ) from None
        return load_directory(directory)

    def generate_model_card(self, *args, **kwargs) -> ModelCard:
        """The card: what the model is, how it was trained and how it scored, and how to load it."""
        cfg, summary = self.config, getattr(self, "run_summary", {}) or {}
        b = cfg.boundaries
        facts = [
            ("boundaries", b.method),
            ("preset", cfg.preset),
            ("parameters", f"{sum(p.numel() for p in self.parameters()):,}"),
            ("sequence length", cfg.train.seq_len),
            ("target rate", b.target_rate),
        ]
        facts += [
            (key.replace("_", " "), _fmt(summary[key]))
            for key in (
                "step",
                "bytes",
                "val_bpb",
                "test_bpb",
                "rate",
                "whitespace_recall",
                "word_start_recall",
            )
            if key in summary
        ]
        data = ModelCardData(
            library_name="rltok", tags=["byte-level", "tokenizer-free", "rltok", b.method]
        )
        return ModelCard.from_template(
            card_data=data,
            template_str=CARD,
            model_id=kwargs.get("model_id", "DIR_OR_REPO_ID"),
            title=f"rltok {cfg.preset} / {b.method}",
            facts=facts,
            description=f"a U-Net over bytes whose chunk boundaries come from the `{b.method}` method"
            if b.method not in ("flat", "bpe-lm")
            else f"the `{b.method}` reference model",
        )

    @torch.no_grad()
    def generate(self, prompts: list[str | bytes], **kwargs) -> list:
        """Continue each prompt (rltok.generate.generate; batched, cached)."""
        return generate(self, prompts, **kwargs)


class ByteUNetLM(ByteUNet, PretrainedModel):
    """The byte U-Net with a boundary method, able to generate and save itself."""


class FlatByteLM(FlatByteTransformer, PretrainedModel):
    """The flat byte transformer (no chunks), able to generate and save itself."""


class BPETokenLM(BPETokenTransformer, PretrainedModel):
    """The transformer over BPE tokens, able to generate and save itself."""


def build_model(cfg: Config) -> PretrainedModel:
    """The model a config describes, weights freshly initialised, carrying the config as `.config`."""
    if cfg.boundaries.method == "flat":
        model = FlatByteLM(cfg.model)
    elif cfg.boundaries.method == "bpe-lm":
        model = BPETokenLM(cfg.model, cfg.boundaries.bpe_vocab)
    else:
        model = ByteUNetLM(cfg.model, boundaries.make(cfg.model.d_model, cfg.boundaries))
    model.config = cfg
    return model


def read_config(directory: Path) -> Config:
    """The config.json of a checkpoint or export directory, validated."""
    try:
        raw = json.loads((directory / CONFIG).read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        raise UserError(
            f"{directory / CONFIG} is missing or not valid JSON; the checkpoint is damaged"
        ) from None
    return Config.from_dict(raw).validate()


def load_weights(model: nn.Module, directory: Path) -> None:
    """Load a directory's weights into a model of the matching config, or say why they do not fit."""
    try:
        weights = load_file(directory / WEIGHTS)
    except (SafetensorError, OSError) as e:
        raise UserError(
            f"{directory / WEIGHTS} cannot be read ({e}); the checkpoint is damaged"
        ) from None
    try:
        model.load_state_dict(weights)
    except RuntimeError:
        raise UserError(
            f"the weights in {directory} do not fit the architecture in its {CONFIG}; "
            "the checkpoint was written by another config or version"
        ) from None


def load_directory(directory: Path) -> PretrainedModel:
    """The model whose config.json and weights are in `directory`, in eval mode, knowing its run's
    summary (a checkpoint's run directory, or an export's own)."""
    model = build_model(read_config(directory))
    load_weights(model, directory)
    model.run_summary = read_summary(directory)
    return model.eval()


def weights_of(model: nn.Module) -> dict[str, torch.Tensor]:
    """A model's state as the contiguous CPU tensors safetensors writes."""
    return {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}


def _fmt(value) -> str:
    return (
        f"{value:.4f}"
        if isinstance(value, float)
        else f"{value:,}"
        if isinstance(value, int)
        else str(value)
    )


def read_summary(checkpoint: Path) -> dict:
    """How training went (summary.json) and how the run scored on its test split (test_eval.json),
    read from the run directory of a checkpoint where they exist."""
    if (checkpoint / SUMMARY).exists():  # an export
        return json.loads((checkpoint / SUMMARY).read_text())
    run = checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else checkpoint
    wanted = {
        "summary.json": {"step": "step", "bytes": "bytes", "val_bpb": "val_bpb"},
        "test_eval.json": {
            "bpb": "test_bpb",
            "rate": "rate",
            "whitespace_recall": "whitespace_recall",
            "word_start_recall": "word_start_recall",
        },
    }
    summary = {}
    for name, keys in wanted.items():
        try:
            found = json.loads((run / name).read_text())
        except (OSError, ValueError):
            continue
        summary.update({ours: found[theirs] for theirs, ours in keys.items() if theirs in found})
    return summary
