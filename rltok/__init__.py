"""rltok: a byte-level language model that learns its own tokenization with reinforcement learning."""

from rltok.checkpoint import load
from rltok.config import Config, preset
from rltok.data import BOS, decode, encode, load_corpus
from rltok.evaluate import evaluate
from rltok.segment import segment
from rltok.train import train

__version__ = "0.1.0"
__all__ = ["BOS", "Config", "decode", "encode", "evaluate", "load", "load_corpus", "preset", "segment", "train"]
