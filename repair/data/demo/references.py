"""The demo's reference translations, read back keyed by the English text normalized the way Purity
writes its texts."""

from __future__ import annotations

from pathlib import Path

from repair.errors import UserError
from repair.fileio import iter_jsonl
from repair.purity.rti import is_word

def normalize_english(text: str) -> str:
    """The key a text is looked up by: tokens joined by one space, `'s` attached, punctuation at both ends dropped."""
    tokens = text.split()
    while tokens and not is_word(tokens[0]):
        tokens.pop(0)
    while tokens and not is_word(tokens[-1]):
        tokens.pop()
    return " ".join(tokens).replace(" 's", "'s")


class References(dict):
    """English text -> reference Chinese; lookups normalize the English as `normalize_english` does."""

    def __missing__(self, key: str) -> str:
        norm = normalize_english(key)
        if norm != key and dict.__contains__(self, norm):
            return dict.__getitem__(self, norm)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or (isinstance(key, str) and dict.__contains__(self, normalize_english(key)))

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default


def aligned(en_lines, zh_lines) -> "References":
    """English lines and their Chinese, line by line (a corpus's test split): the first reference of each text,
    looked up as written (spacing aside) or as normalize_english has it."""
    refs = References()
    for en, zh in zip(en_lines, zh_lines):
        en, zh = " ".join(en.split()), " ".join(zh.split())
        if en and zh:
            dict.setdefault(refs, en, zh)
            dict.setdefault(refs, normalize_english(en), zh)
    return refs


References.aligned = staticmethod(aligned)


def load_references(path: str | Path) -> References:
    """references.jsonl -> {normalized English: Chinese}; a malformed or contradictory line is named."""
    refs = References()
    for line, row in iter_jsonl(path):
        if not (isinstance(row, dict) and isinstance(row.get("en"), str) and isinstance(row.get("zh"), str)):
            raise UserError(f'{path}:{line}: expected {{"en": "...", "zh": "..."}}')
        key = normalize_english(row["en"])
        if not key:
            raise UserError(f"{path}:{line}: empty English text")
        if dict.__contains__(refs, key) and dict.__getitem__(refs, key) != row["zh"]:
            raise UserError(f"{path}:{line}: {key!r} already has the reference {dict.__getitem__(refs, key)!r}")
        dict.__setitem__(refs, key, row["zh"])
    return refs
