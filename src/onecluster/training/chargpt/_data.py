"""The example's text: TinyShakespeare when given (its sha256 is checked), else a small
generated corpus, so the example and its tests run where the file is absent."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from onecluster.errors import ValidationError

__all__ = ["TINYSHAKESPEARE_SHA256", "Corpus", "load_corpus"]

#: karpathy/char-rnn data/tinyshakespeare/input.txt, 1,115,394 bytes.
TINYSHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
_WORDS = (
    "the king",
    "my lord",
    "good",
    "sweet",
    "night",
    "love",
    "crown",
    "speak",
    "thou",
    "art",
    "noble",
    "heart",
    "blood",
    "france",
    "england",
    "sword",
    "die",
    "live",
)


@dataclass(frozen=True)
class Corpus:
    """Encoded text split 90/10 into training and validation characters."""

    name: str
    vocab: int
    train: torch.Tensor
    val: torch.Tensor

    def batch(
        self, gen: torch.Generator, size: int, context: int, *, val: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        data = self.val if val else self.train
        starts = torch.randint(len(data) - context - 1, (size,), generator=gen)
        x = torch.stack([data[s : s + context] for s in starts.tolist()])
        y = torch.stack([data[s + 1 : s + context + 1] for s in starts.tolist()])
        return x, y


def _generated(chars: int = 200_000) -> str:
    rng = random.Random(7)
    lines = []
    size = 0
    while size < chars:
        line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9))).capitalize() + ".\n"
        lines.append(line)
        size += len(line)
    return "".join(lines)


def load_corpus(path: Path | None, *, check_sha256: bool = True) -> Corpus:
    """The corpus at ``path`` (TinyShakespeare's hash checked when ``check_sha256``), or the
    generated one for ``None``; :class:`ValidationError` for a file that is not the one."""
    if path is None:
        text, name = _generated(), "generated"
    else:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ValidationError(f"cannot read the text at {path}: {exc.strerror}") from exc
        if check_sha256 and hashlib.sha256(raw).hexdigest() != TINYSHAKESPEARE_SHA256:
            raise ValidationError(
                f"{path} is not TinyShakespeare (sha256 differs)",
                hint="pass the file itself, or --no-check for another text",
            )
        try:
            text, name = raw.decode("utf-8"), path.name
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{path} is not UTF-8 text: {exc.reason}") from exc
        if len(text) < 1000:
            raise ValidationError(f"{path} holds {len(text)} characters; the example needs 1,000")
    alphabet = sorted(set(text))
    index = {c: i for i, c in enumerate(alphabet)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    cut = int(0.9 * len(data))
    return Corpus(name, len(alphabet), data[:cut], data[cut:])
