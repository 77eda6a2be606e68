"""rltok: a byte-level language model that learns its own tokenization with reinforcement learning."""

from rltok.checkpoint import load
from rltok.config import Config, preset
from rltok.data import load_corpus
from rltok.evaluate import evaluate
from rltok.generate import generate
from rltok.pretrained import PretrainedModel
from rltok.segment import segment
from rltok.text import BOS, decode, encode
from rltok.train import train

__version__ = "0.1.0"


def from_pretrained(path_or_repo_id: str, **kwargs):
    """A model saved with `model.save_pretrained(DIR)`, from that directory or a Hub repo id (any
    huggingface_hub download option, such as revision=, goes through)."""
    return PretrainedModel.from_pretrained(path_or_repo_id, **kwargs)


__all__ = [
    "BOS",
    "Config",
    "decode",
    "encode",
    "evaluate",
    "from_pretrained",
    "generate",
    "load",
    "load_corpus",
    "preset",
    "segment",
    "train",
]
