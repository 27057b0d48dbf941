"""What a constrained search returns, whatever the family that runs it: a hypothesis with its score and whether
it holds every phrase asked for (repair.nmt.fairseq.constrained, repair.nmt.hf.search; the face's Searcher)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from repair.data.prepare import clean_text
from repair.text import squash

SPM_SPACE = "\u2581"  # SentencePiece's word-start mark


@dataclass(frozen=True)
class Hypothesis:
    text: str
    score: float  # the model's log-probability per token (length-normalized, len_penalty applied)
    met: bool  # every constraint phrase appears in `text`


def contains_all(text: str, phrases: Sequence[str], zh: bool = True) -> bool:
    """Whether `text` contains every phrase, in order, each after the previous one (ordered constraints)."""
    text, pos = squash(text, zh), 0
    for p in phrases:
        p = squash(clean_text(p), zh)
        if not p:
            continue
        at = text.find(p, pos)
        if at < 0:
            return False
        pos = at + len(p)
    return True
