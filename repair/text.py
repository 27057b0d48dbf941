"""English text as the repair measures and edits it: tokens as a parser splits them, normalized keys for
containment, content words, a final s aside. Shared by the scoped edit (repair.edit), the measures and the
review memory; below every part that uses them."""

from __future__ import annotations

import re
import string
from typing import Iterable

PUNCTUATION = set(string.punctuation) | set("，。、；：？！“”‘’（）《》【】…—·")


# English words as a parser (spaCy, the Penn Treebank) or Moses splits them: punctuation apart from words
# ("father." -> father .), a clitic apart from its word (Tom's -> tom 's, don't -> do n't), hyphened and dotted
# words whole (e-mail, U.S).
_TOKEN = re.compile(r"\w+(?=n['’]t\b)|n['’]t\b|['’]\w+|\w+(?:[-.]\w+)*|[^\w\s]")


def english_tokens(text: str) -> list[str]:
    """The words and punctuation of an English text, lower-cased (see _TOKEN)."""
    return _TOKEN.findall(text.lower().replace("’", "'"))


def source_key(text: str) -> str:
    """English normalized for containment and word counts: lower case, tokens (english_tokens) joined by one space,
    so that "father." holds the word "father" as the sentences that end in it do."""
    return " ".join(english_tokens(text))


def contains_any(text: str, sources: Iterable[str]) -> bool:
    """Whether the English `text` contains one of `sources` (normalized keys) as a run of whole tokens."""
    padded = f" {source_key(text)} "
    return any(f" {core} " in padded for core in map(inner, sources) if core)


def inner(key: str) -> str:
    """A normalized key without the punctuation at its ends ("my father is a sailor ." -> "my father is a sailor"):
    a sentence is contained in another that ends otherwise."""
    tokens = key.split()
    while tokens and set(tokens[0]) <= PUNCTUATION:
        tokens.pop(0)
    while tokens and set(tokens[-1]) <= PUNCTUATION:
        tokens.pop()
    return " ".join(tokens)


def content_words(text: str, stopwords: frozenset[str]) -> frozenset[str]:
    return frozenset(w for w in english_tokens(text) if w not in stopwords and not set(w) <= PUNCTUATION
                     and not w.startswith("'") and w != "n't")  # a clitic is no content word


def singular(word: str) -> str:
    """A word with a final s aside (otter, otters), so that a taught noun covers its other number."""
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def squash(text: str, zh: bool) -> str:
    """A text's spacing aside, for containment: Chinese without spaces, other text with single spaces."""
    return re.sub(r"\s+", "", text) if zh else " ".join(text.split())
