"""Token estimates, used only to *reserve* quota before a call; the bill uses the provider's
own ``usage``.

With tiktoken's encodings on disk (``o200k_base``, ``cl100k_base``; the caller points
``TIKTOKEN_CACHE_DIR`` at them, as ``onecluster gateway serve --tokenizers DIR`` does) text is
counted exactly.  Without them tiktoken would try to download the files, so the estimator
never asks it and counts ``ceil(utf-8 bytes / 3)`` instead: about a third over for English
(≈ 4 bytes a token), about right for CJK (3 bytes a character, ≈ 1 token), so reservations
err on the safe side.  See ``docs/gateway.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

__all__ = ["ENCODING_FILES", "TokenCounter", "TokenEstimator", "byte_estimate"]

ENCODING_FILES = {
    "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
    "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
}
"""tiktoken's cache file names (the SHA-1 of each encoding's download URL)."""

_PER_MESSAGE = 4  # role and separators of one chat message (OpenAI's own counting recipe)
_PER_REPLY = 3  # the assistant's reply is primed with three tokens
_PER_IMAGE = 765  # a high-detail 512 px tile: 170 x 4 + 85, OpenAI's published cost


class TokenCounter(Protocol):
    """Counts the tokens of a text."""

    def __call__(self, text: str) -> int:
        """Tokens in ``text``."""
        ...


def byte_estimate(text: str) -> int:
    """The offline estimate: ``ceil(utf-8 bytes / 3)``."""
    return math.ceil(len(text.encode("utf-8")) / 3)


class TokenEstimator:
    """Counts prompts per encoding; ``exact`` says whether tiktoken's files were found."""

    def __init__(self, counters: dict[str, TokenCounter]) -> None:
        self._counters = counters

    @classmethod
    def load(cls, tokenizers_dir: Path | None) -> TokenEstimator:
        """Encodings whose files are in ``tokenizers_dir``; the byte estimate for the rest."""
        counters: dict[str, TokenCounter] = {}
        if tokenizers_dir is not None:
            import tiktoken  # noqa: PLC0415  (an import only a serving gateway pays)

            for name, file in ENCODING_FILES.items():
                if (tokenizers_dir / file).is_file():
                    encoding = tiktoken.get_encoding(name)
                    counters[name] = _tiktoken_counter(encoding)
        return cls(counters)

    def exact(self, encoding: str) -> bool:
        """True when ``encoding`` is counted by tiktoken, not estimated from bytes."""
        return encoding in self._counters

    def count(self, encoding: str, text: str) -> int:
        """Tokens of ``text`` in ``encoding`` (or the byte estimate)."""
        counter = self._counters.get(encoding)
        return counter(text) if counter is not None else byte_estimate(text)

    def texts(self, encoding: str, texts: Iterable[str]) -> int:
        """Tokens of several texts."""
        return sum(self.count(encoding, t) for t in texts)

    def chat(self, encoding: str, messages: list[dict[str, object]]) -> int:
        """Tokens of a chat prompt: every text part, plus OpenAI's per-message overheads."""
        total = _PER_REPLY
        for message in messages:
            total += _PER_MESSAGE
            for key, value in message.items():
                if key == "content":
                    total += self._content(encoding, value)
                elif isinstance(value, str):
                    total += self.count(encoding, value)
                elif value is not None:
                    total += self.count(encoding, str(value))
        return total

    def _content(self, encoding: str, content: object) -> int:
        if isinstance(content, str):
            return self.count(encoding, content)
        if not isinstance(content, list):
            return 0 if content is None else self.count(encoding, str(content))
        total = 0
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                total += self.count(encoding, part["text"])
            elif isinstance(part, dict) and part.get("type") == "image_url":
                total += _PER_IMAGE
            else:
                total += self.count(encoding, str(part))
        return total


def _tiktoken_counter(encoding: object) -> TokenCounter:
    encode = encoding.encode_ordinary  # type: ignore[attr-defined]

    def count(text: str) -> int:
        return len(encode(text))

    return count
