"""Detection: how much of an RTI's translation is missing from its container's translation."""

from __future__ import annotations

import logging
import re
from collections import Counter

UNITS = ("char", "word")
# Tokens whose absence says nothing about a translation: quotes, commas, 的, 了, the space.
DEFAULT_STOP_TOKENS = ("“", "”", "，", "·", ",", "的", "了", "'", '"', " ")
_LATIN = re.compile("[a-z]")


def squeeze(text: str | None) -> str:
    """A translation without its whitespace: two translations that differ only in spaces are the same
    (None, a text with no translation, is the empty text)."""
    return "".join((text or "").split())


def same_translation(a: str | None, b: str | None) -> bool:
    """Whether two translations are the same text, whitespace and character width aside: compared in Unicode's
    compatibility form (NFKC), so that a full-width comma is the ASCII one. A model whose tokenizer normalizes its
    text so (SentencePiece's default, OPUS-MT's) can never write `，`: its `,` in place of a correction's `，` is the
    correction."""
    import unicodedata

    return squeeze(unicodedata.normalize("NFKC", a or "")) == squeeze(unicodedata.normalize("NFKC", b or ""))


def tokens(text: str, unit: str = "char") -> list[str]:
    """Characters (`char`, the reference for Chinese) or jieba words (`word`)."""
    if unit == "char":
        return list(text)
    if unit == "word":
        import jieba

        jieba.setLogLevel(logging.WARNING)
        return jieba.lcut(text)
    raise ValueError(f"unit must be one of {', '.join(UNITS)}, not {unit!r}")


def missing_tokens(rti_translation: str, container_translation: str, unit: str = "char",
                   stop_tokens: tuple[str, ...] | frozenset[str] = DEFAULT_STOP_TOKENS) -> list[str]:
    """Tokens of the RTI's translation (stop tokens removed) that the container's translation
    lacks, with multiplicity, in order of first appearance."""
    stop = set(stop_tokens)
    rti_counts = Counter(t for t in tokens(rti_translation, unit) if t not in stop)
    container_counts = Counter(tokens(container_translation, unit))
    missing: list[str] = []
    for token, count in rti_counts.items():
        missing.extend([token] * max(0, count - container_counts[token]))
    return missing


def bow_distance(rti_translation: str, container_translation: str, unit: str = "char",
                 stop_tokens: tuple[str, ...] | frozenset[str] = DEFAULT_STOP_TOKENS) -> int:
    """Sum over the RTI translation's tokens t of max(0, count_RTI(t) - count_container(t))."""
    return len(missing_tokens(rti_translation, container_translation, unit, stop_tokens))


def has_latin(text: str) -> bool:
    """A lowercase Latin letter: the translation left English words untranslated."""
    return _LATIN.search(text) is not None
