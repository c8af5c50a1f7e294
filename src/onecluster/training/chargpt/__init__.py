"""The example: a character-level GPT trained across sites (``python -m
onecluster.training.chargpt --help``)."""

from onecluster.training.chargpt._data import TINYSHAKESPEARE_SHA256, Corpus, load_corpus
from onecluster.training.chargpt._model import CharGPT, GPTConfig

__all__ = ["TINYSHAKESPEARE_SHA256", "CharGPT", "Corpus", "GPTConfig", "load_corpus"]
