"""What the check of a model before testing measures whatever its family (repair.face.Translator.check_model):
the sample it is made on, the thresholds that make a measure far off, and the translations' own measures (subword
markers left in, degenerate repetition). The fairseq family's check (repair.nmt.fairseq.modelcheck) adds its
dictionaries, subword settings and validation loss; the transformers family's (repair.nmt.hf.check) its tokenizer's
unknown tokens."""

from __future__ import annotations

import re
from typing import Callable, Sequence

SAMPLE = 80            # sentences (and validation pairs) measured
MAX_WORDS = 60         # longer sentences are left out of the sample
UNKNOWN_MAX = 0.25     # share of tokens a side's dictionary does not know (a healthy model: a few per cent)
MARKED_MAX = 0.2       # share of translations holding subword markers
REPEATED_MAX = 0.5     # share of translations with degenerate repetition ...
DISTINCT_MIN = 0.5     # ... where fewer than this share of them differ: one phrase for every input (a weak model
                       # repeats itself too, but says something else for each sentence: the demo's, 38% and 100%)
LOSS_FACTOR = 1.5      # validation loss at most this times the recorded one (finetune.encoding_check's default)
SUBWORD_KEYS = ("bpe", "sentencepiece_model", "bpe_codes")
# a unit of 3 or more characters said twice in a row, or of 2 or more said three times (`房间里房间里`, `我们我们我们`)
REPEATED = re.compile(r"(\S{3,}?)\1|(\S{2,}?)\2\2")
MARKER = re.compile("\u2581|@@( |$)")


def translation_measures(translations: Sequence[str]) -> dict:
    """The shares of translations that hold subword markers and that repeat a phrase, and how many differ."""
    n = len(translations)
    if not n:
        return {}
    marked = [t for t in translations if MARKER.search(t)]
    repeated = [t for t in translations if REPEATED.search(t.replace(" ", ""))]
    return {"translations": n, "marked": round(len(marked) / n, 3), "repeated": round(len(repeated) / n, 3),
            "distinct": round(len(set(translations)) / n, 3), "marked_examples": marked[:2],
            "repeated_examples": repeated[:2]}


def sample(texts: Sequence, n: int = SAMPLE, words: Callable = lambda t: t) -> list:
    """Up to `n` items spread evenly over `texts` (non-empty, at most MAX_WORDS words), in order."""
    kept = [t for t in texts if words(t).strip() and len(words(t).split()) <= MAX_WORDS]
    if len(kept) <= n:
        return kept
    return [kept[int(k * len(kept) / n)] for k in range(n)]


def translation_problems(measures: dict) -> list[dict]:
    problems = []
    if measures.get("marked", 0) > MARKED_MAX:
        problems.append({"side": "tgt", "what": f"{measures['marked']:.0%} of its translations hold subword markers "
                                                f"(e.g. {measures['marked_examples'][0]!r})"})
    if measures.get("repeated", 0) > REPEATED_MAX and measures.get("distinct", 1) < DISTINCT_MIN:
        problems.append({"side": "tgt", "what": f"{measures['repeated']:.0%} of its translations repeat a phrase and "
                                                f"only {measures['distinct']:.0%} differ (e.g. "
                                                f"{measures['repeated_examples'][0]!r})"})
    return problems
