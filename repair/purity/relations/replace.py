"""Word replacement (the TransRepair / CAT family): replacing one noun or adjective of a sentence with another
of the same part of speech that fits the context should change the translation only where that word is.

A case is (original sentence, mutant). The replaced word is judged in context: a short phrase around it (its
noun phrase, with determiner and modifiers, of at most `max_span` words; else the word with its neighbours; a
word with no such phrase short of the whole sentence gives no case) is translated as it stands in the original
and in the mutant, and again closed as the sentence is ("How many brothers?" for a question: a translator may
translate a question's words otherwise than a fragment's). In each of these contexts, W is what the original
phrase's translation has that the mutant phrase's lacks, W' the reverse. Distance, in tokens (characters or
jieba words, stop tokens left out): the tokens of the original's translation that the mutant's lacks beyond W,
plus those of the mutant's translation that the original's lacks beyond W', in the context that leaves the
fewest (a jieba word only when it holds a character the characters' own differences leave unexplained: jieba
may cut the same characters otherwise beside another word). A phrase holds whole words as the sentence writes
them ("mother-in-law"), two at least. When the two translations are the same (whitespace aside) while W and W' differ in a context, the
replacement was ignored: the distance is the largest |W| + |W'| and the evidence says "replacement ignored".

Candidates, found offline:
- `vectors` (`auto` with a corpus and no lexicon): the nearest neighbours of the word in word vectors trained on
  the corpus (repair.purity.relations.natural), kept when the corpus mostly uses them with the word's tag.
- `context` (`auto` without a lexicon or corpus): words tagged with the same part of speech in the sentences
  under test, ranked by how many of the replaced word's two neighbours they are seen beside in the training
  corpus and the sentences under test.
- `lexicon` (`auto` with one): a JSONL file of interchangeable words, `{"tag": "NN", "words": [...]}` per line (the demo's grammar
  writes one); candidates are the other words of a group holding the word with the same tag, ranked as above.
- `mlm`: a masked language model (`transformers` and a local model folder, `mlm_model=`), its proposals kept when
  seen with the same part of speech in the sentences under test.
Filters: same Penn tag (NN, NNS, JJ: so a plural stays plural and the verb agrees), a lowercase alphabetic word of
2+ letters that is not a stop word, an adjective only inside a noun phrase (attributive), "a"/"an" before it still
right for the new word (by its first letter), a capitalized word only at the sentence's start, the new word
seen in at least `min_context` (default 2) of the word's two contexts, in the training corpus or the sentences
under test: its left neighbour, and for an adjective the noun it modifies (seen right before it: the
adjective-noun dependency), for a noun its right neighbour; and, with a corpus, a trigram language model of it
must not find the new word fitting its neighbours more than `lm_max_drop` nats per token worse than the old one.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from repair.errors import UserError
from repair.fileio import iter_jsonl, read_text_lines
from repair.purity.check import DEFAULT_STOP_TOKENS, squeeze, tokens
from repair.purity.relations.base import Case, Check, Parsed, Relation, Role
from repair.purity.relations.natural import WORD, Natural, words_of
from repair.purity.relations.rti import stopword_set
from repair.purity.rti import Node, TreeSyntaxError, clean_tree, is_word, parse_tree, unescape


TAGS = ("NN", "NNS", "JJ")
SOURCES = ("auto", "vectors", "context", "lexicon", "mlm")
_ALPHA = re.compile(r"[a-z]{2,}")
_CLITIC = re.compile(r"['’][a-z]+|n['’]t", re.I)


NOUN_TAGS = ("NN", "NNS")


def tagged_leaves(tree: str) -> list[tuple[str, str, int | None]]:
    """(tag, word, head) for every leaf of a bracketed tree, in order. `head` is set for an attributive
    adjective: the index of the last noun after it among the children of the noun phrase it modifies
    (through an ADJP); None otherwise."""
    node = clean_tree(parse_tree(tree))
    out: list[tuple[str, str, int | None]] = []
    pending: list[tuple[int, list[int]]] = []  # (adjective's leaf index, the NP's noun leaf indexes)

    def walk(n: Node, np_nouns: list[int] | None) -> None:
        nouns: list[int] | None = [] if n.label == "NP" else (np_nouns if n.label == "ADJP" else None)
        for child in n.children:
            if isinstance(child, Node) and len(child.children) == 1 and isinstance(child.children[0], str):
                out.append((child.label, child.children[0], None))
                if child.label in NOUN_TAGS and n.label == "NP":
                    nouns.append(len(out) - 1)
                elif child.label == "JJ" and nouns is not None:
                    pending.append((len(out) - 1, nouns))
            elif isinstance(child, Node):
                walk(child, nouns)
            else:
                out.append((n.label, child, None))

    if node is not None:
        walk(node, None)
    for i, nouns in pending:
        after = [k for k in nouns if k > i]
        if after:
            out[i] = (out[i][0], out[i][1], after[-1])
    return out


def article_fits(article: str, word: str) -> bool:
    """"a"/"an" before `word`, by its first letter (so "an hour" and "a university" are judged wrongly)."""
    return (article.lower() == "an") == (word[0].lower() in "aeiou")


def replace_word(sentence: str, word: str, nth: int, new: str) -> str | None:
    """`sentence` with the nth (0-based) whole-word occurrence of `word` replaced, or None if it is not there."""
    spans = [m.span() for m in re.finditer(r"(?<![\w'-])" + re.escape(word) + r"(?![\w-])", sentence)]
    if nth >= len(spans):
        return None
    a, b = spans[nth]
    return sentence[:a] + new + sentence[b:]


def closing(sentence: str) -> str:
    """The punctuation that closes a sentence ("?", "!", "." or a run of them), or "" when none does."""
    m = re.search(r"[.?!]+$", sentence.rstrip())
    return m.group() if m else ""


def np_ranges(tree: str) -> list[tuple[int, int]]:
    """(start, end) leaf indexes of every noun phrase (NP, WHNP) of a bracketed tree, leaves numbered as
    tagged_leaves does."""
    node = clean_tree(parse_tree(tree))
    out: list[tuple[int, int]] = []
    count = 0

    def walk(n: Node) -> None:
        nonlocal count
        start = count
        for child in n.children:
            if isinstance(child, Node):
                walk(child)
            else:
                count += 1
        if n.label in ("NP", "WHNP"):  # WHNP: a question's "How many brothers" in Penn trees (stanza's)
            out.append((start, count))

    if node is not None:
        walk(node)
    return out


def leaf_offsets(leaves: Sequence[str], sentence: str) -> list[tuple[int, int]] | None:
    """(start, end) character offsets of each leaf in `sentence` (leaves spelled as written there, any spacing
    between them), or None when the leaves do not spell the sentence."""
    out, at = [], 0
    for leaf in leaves:
        text = unescape(leaf)
        while at < len(sentence) and sentence[at].isspace():
            at += 1
        if not sentence.startswith(text, at):
            return None
        out.append((at, at + len(text)))
        at += len(text)
    return out


def written_words(offsets: Sequence[tuple[int, int]]) -> list[int]:
    """For each leaf (its characters in the sentence, leaf_offsets), the number of the word the sentence writes it
    in: leaves with no space between them ("T", "-", "shirts"; "Tom", "'s") are one word to a translator."""
    return list(itertools.accumulate((int(k > 0 and a > offsets[k - 1][1]) for k, (a, _) in enumerate(offsets))))


def context_span(i: int, leaves: Sequence[str], nps: Sequence[tuple[int, int]], max_span: int,
                 written: Sequence[int] | None = None) -> tuple[str, int, int] | None:
    """The phrase the word at leaf i is judged in: ("noun phrase", start, end) for the smallest noun phrase
    holding it with 2 to `max_span` words, not the whole sentence; else ("neighbours", start, end): the word
    with the words next to it, fewer when they would make the whole sentence; None when no such span exists.
    A span never starts with a clitic ('s, n't): it takes the word the clitic belongs to. `written`: the
    sentence's word of each leaf (written_words); a span then holds whole words as the sentence writes them
    ("your mother" of "your mother-in-law" takes "-in-law": a translator reads "mother" otherwise than
    "mother-in-law") and two of them at least ("T-shirts" or "Tom's" alone is one word to a translator, which
    may translate it as a word alone)."""
    words = [k for k, leaf in enumerate(leaves) if is_word(leaf)]
    written = list(range(len(leaves))) if written is None else written
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for k in words:
        first.setdefault(written[k], k)
        last[written[k]] = k

    def ok(a: int, b: int) -> bool:
        inside = [k for k in words if a <= k < b]
        return (2 <= len(inside) <= max_span and len(inside) < len(words)
                and len({written[k] for k in inside}) >= 2)

    def trimmed(a: int, b: int) -> tuple[int, int]:
        while a < b and not is_word(leaves[a]):
            a += 1
        while b > a and not is_word(leaves[b - 1]):
            b -= 1
        while 0 < a < b and _CLITIC.fullmatch(unescape(leaves[a])):
            a -= 1
        return (first[written[a]], last[written[b - 1]] + 1) if a < b else (a, b)

    for a, b in sorted((r for r in nps if r[0] <= i < r[1]), key=lambda r: r[1] - r[0]):
        a, b = trimmed(a, b)
        if ok(a, b):
            return "noun phrase", a, b
    left = max((k for k in words if k < i), default=None)
    right = min((k for k in words if k > i), default=None)
    for a, b in ((left, right), (left, None), (None, right)):
        a, b = trimmed((i if a is None else a), (i if b is None else b) + 1)
        if (a, b) != (i, i + 1) and ok(a, b):
            return "neighbours", a, b
    return None


class ContextIndex:
    """Which of the asked word pairs are seen next to each other in a corpus and the sentences under test
    (lowercased), and how often each asked word is."""

    def __init__(self, pairs: set[tuple[str, str]], words: set[str]):
        self.asked_pairs, self.asked_words = pairs, words
        self.seen: set[tuple[str, str]] = set()
        self.freq: Counter = Counter()

    def add(self, words: Sequence[str]) -> None:
        words = [w.lower() for w in words]
        self.freq.update(w for w in words if w in self.asked_words)
        self.seen.update(p for p in zip(words, words[1:]) if p in self.asked_pairs)

    def add_text(self, line: str) -> None:
        self.add(WORD.findall(line))


def read_lexicon(path: str | Path) -> dict[tuple[str, str], list[str]]:
    """(tag, word) -> the other words of its groups, from a JSONL file of {"tag", "words"}."""
    out: dict[tuple[str, str], list[str]] = {}
    for n, row in iter_jsonl(path):
        if not (isinstance(row, dict) and row.get("tag") in TAGS and isinstance(row.get("words"), list)
                and all(isinstance(w, str) and w for w in row["words"])):
            raise UserError(f'{path}:{n}: expected {{"tag": one of {", ".join(TAGS)}, "words": ["...", ...]}}')
        for w in row["words"]:
            others = out.setdefault((row["tag"], w), [])
            others.extend(x for x in row["words"] if x != w and x not in others)
    return out


class MaskedLM:
    """Proposals of a local masked language model (transformers: AutoTokenizer, AutoModelForMaskedLM)."""

    def __init__(self, model: str | None, top_k: int = 20):
        if not model or not Path(model).is_dir():
            raise UserError(f"purity.replace.mlm_model={model!r}: give a local folder with a masked language model "
                            "(e.g. one saved with save_pretrained); nothing is downloaded")
        try:
            from transformers import AutoModelForMaskedLM, AutoTokenizer
        except ImportError:
            raise UserError("purity.replace.candidates=mlm needs the transformers package (pip install transformers) "
                            "and a local masked-LM folder in purity.replace.mlm_model") from None
        except OSError as e:  # an installed package transformers loads (e.g. torchaudio) that does not fit torch
            raise UserError(f"purity.replace.candidates=mlm: transformers cannot be imported here ({e}); "
                            "use purity.replace.candidates=context or lexicon") from None
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(model), local_files_only=True)
            self.model = AutoModelForMaskedLM.from_pretrained(str(model), local_files_only=True).eval()
        except (OSError, ValueError) as e:
            raise UserError(f"purity.replace.mlm_model={model}: not a masked language model transformers can load "
                            f"({str(e).splitlines()[0]})") from None
        if self.tokenizer.mask_token is None:
            raise UserError(f"purity.replace.mlm_model={model}: its tokenizer has no mask token")
        self.top_k = top_k

    def propose(self, sentence: str, word: str, nth: int) -> list[str]:
        import torch

        masked = replace_word(sentence, word, nth, self.tokenizer.mask_token)
        if masked is None:
            return []
        inputs = self.tokenizer(masked, return_tensors="pt", truncation=True)
        at = (inputs["input_ids"][0] == self.tokenizer.mask_token_id).nonzero()
        if not len(at):
            return []
        with torch.no_grad():
            logits = self.model(**inputs).logits[0, int(at[0])]
        ids = logits.topk(min(self.top_k, logits.shape[-1])).indices.tolist()
        return [self.tokenizer.decode([i]).strip() for i in ids]


@dataclass
class Slot:
    """A replaceable word of a sentence under test and what is known of it."""

    k: int                 # the sentence's index
    i: int                 # the word's leaf index
    tag: str
    leaf: str              # as the sentence writes it
    word: str              # lowercased at the sentence's start
    left: str | None
    right: str | None
    head: str | None       # the noun an attributive adjective modifies
    at: tuple[int, int]                  # its characters in the sentence
    span: tuple[str, int, int]           # (kind, first, last character) of the phrase it is judged in
    governor: tuple[int, int] | None     # leaves from a noun to its nearest content word outside its phrase
    proposals: list[str]
    nth: int = 0           # how many times the sentence writes the same word before it


class ReplaceRelation(Relation):
    name = "replace"
    description = "replacing one noun or adjective by a close one changes the translation only there"
    roles = (Role("original", "Original", "the sentence under test", "o"),
             Role("mutant", "Mutant", "one word replaced", "m"))
    evidence_label = "Changed beyond the replaced word's own translation:"

    def __init__(self, *, unit: str = "char", stop_tokens: Iterable[str] = DEFAULT_STOP_TOKENS,
                 stopwords: str | Path | Iterable[str] | None = None, candidates: str = "auto",
                 lexicon: str | None = None, corpus: str | Sequence[str] | None = None, corpus_lines: int = 200000,
                 per_word: int = 2, max_mutants: int = 4, min_context: int = 2, tags: Sequence[str] = TAGS,
                 mlm_model: str | None = None, neighbours: int = 50, lm_max_drop: float | None = 1.5,
                 max_span: int = 5, near: int = 4, cache_dir: str | None = None, tagger: str | None = None):
        if candidates not in SOURCES:
            raise UserError(f"purity.replace.candidates={candidates!r}: choose one of {', '.join(SOURCES)}")
        self.corpus = [corpus] if isinstance(corpus, (str, Path)) else list(corpus or [])
        if candidates == "auto":
            candidates = "lexicon" if lexicon else "vectors" if self.corpus else "context"
        if candidates == "lexicon" and not lexicon:
            raise UserError("purity.replace.candidates=lexicon needs purity.replace.lexicon=FILE.jsonl")
        if candidates == "vectors" and not self.corpus:
            raise UserError("purity.replace.candidates=vectors needs an English corpus: purity.replace.corpus=FILE "
                            "(the loop gives its training English)")
        bad = [t for t in tags if t not in TAGS]
        if bad:
            raise UserError(f"purity.replace.tags: {bad} not supported; choose among {', '.join(TAGS)}")
        for key, value, least in (("per_word", per_word, 1), ("max_mutants", max_mutants, 1),
                                  ("min_context", min_context, 0), ("corpus_lines", corpus_lines, 0),
                                  ("neighbours", neighbours, 1), ("max_span", max_span, 2), ("near", near, 0)):
            if not isinstance(value, int) or value < least:
                raise UserError(f"purity.replace.{key}={value!r}: give a whole number >= {least}")
        if min_context > 2:
            raise UserError(f"purity.replace.min_context={min_context}: a word has two neighbours; give 0, 1 or 2")
        if lm_max_drop is not None and not isinstance(lm_max_drop, (int, float)):
            raise UserError(f"purity.replace.lm_max_drop={lm_max_drop!r}: give a number (nats per token) or null")
        self.unit = unit
        self.stop_tokens = frozenset(stop_tokens)
        self.stopwords = stopword_set(stopwords)
        self.source = candidates
        self.lexicon = read_lexicon(lexicon) if lexicon else None
        self.corpus_lines = corpus_lines
        self.per_word, self.max_mutants, self.min_context = per_word, max_mutants, min_context
        self.tags = tuple(tags)
        self.mlm = MaskedLM(mlm_model) if candidates == "mlm" else None
        self.lm_max_drop, self.max_span, self.near = lm_max_drop, max_span, near
        self._natural_options = {"cache_dir": cache_dir, "tagger": tagger, "neighbours": neighbours}
        self._natural: Natural | None = None
        self._counts: dict = {}

    def natural(self) -> Natural | None:
        """Vectors, tags and the language model of the corpus (None without a corpus), built on first use."""
        if self._natural is None and self.corpus:
            lines = [line for path in self.corpus
                     for line in itertools.islice(read_text_lines(path), self.corpus_lines)]
            if lines or self.source == "vectors":  # an empty corpus only turns the other sources' filters off
                self._natural = Natural(lines, **self._natural_options)
        return self._natural

    # ---- candidates

    def _vocabulary(self, leaves_per_sentence: list[list[tuple]]) -> dict[str, Counter]:
        by_tag: dict[str, Counter] = {t: Counter() for t in self.tags}
        for leaves in leaves_per_sentence:
            for tag, word, _ in leaves:
                if tag in by_tag and self._replaceable(word):
                    by_tag[tag][word] += 1
        return by_tag

    def _index(self, leaves_per_sentence: list[list[tuple]], slots: list[Slot]) -> ContextIndex:
        """Reads the sentences and the corpus once, for the pairs the candidates need."""
        pairs, words = set(), set()
        for slot in slots:
            after = slot.head if slot.head is not None else slot.right
            for new in slot.proposals:
                words.add(new)
                if slot.left is not None:
                    pairs.add((slot.left.lower(), new))
                if after is not None:
                    pairs.add((new, after.lower()))
        index = ContextIndex(pairs, words)
        for leaves in leaves_per_sentence:
            index.add([w for _, w, _ in leaves])
        for path in self.corpus:
            for line in itertools.islice(read_text_lines(path), self.corpus_lines):
                index.add_text(line)
        return index

    @staticmethod
    def _score(index: ContextIndex, slot: Slot, new: str) -> int:
        """How many of the word's contexts the new word is seen in: its left neighbour, and for an attributive
        adjective the noun it modifies (seen right after it), for any other word its right neighbour."""
        after = slot.head if slot.head is not None else slot.right
        return ((slot.left is not None and (slot.left.lower(), new) in index.seen)
                + (after is not None and (new, after.lower()) in index.seen))

    def _replaceable(self, word: str) -> bool:
        return bool(_ALPHA.fullmatch(word)) and word not in self.stopwords

    def _proposals(self, slot: Slot, by_tag: dict[str, Counter], sentence: str,
                   filtered: Counter) -> list[str]:
        if self.source == "lexicon":
            return list(self.lexicon.get((slot.tag, slot.word), []))
        if self.source == "mlm":
            return [w for w in self.mlm.propose(sentence, slot.word, slot.nth) if w in by_tag[slot.tag]]
        if self.source == "vectors":
            natural = self.natural()
            similar = natural.similar(slot.word)
            if not similar:
                filtered["unknown word"] += 1
            filtered["considered"] += len(similar)
            kept = [w for w in similar if natural.has_tag(w, slot.tag)]
            filtered["pos"] += len(similar) - len(kept)
            return kept
        return list(by_tag[slot.tag])

    def _slots(self, p: Parsed, k: int, leaves: list[tuple], by_tag: dict[str, Counter], filtered: Counter) -> list[Slot]:
        """The sentence's replaceable words, each with its proposals past the word and article filters."""
        names = [w for _, w, _ in leaves]
        offsets = leaf_offsets(names, p.sentence)
        nps = np_ranges(p.tree)
        written = written_words(offsets) if offsets else None
        out, seen_word = [], Counter()
        for i, (tag, leaf, head) in enumerate(leaves):
            nth = seen_word[leaf]
            seen_word[leaf] += 1
            word = leaf.lower() if i == 0 else leaf
            if tag not in self.tags or not self._replaceable(word):
                continue
            if tag == "JJ" and head is None:
                filtered["predicative"] += 1  # an adjective outside a noun phrase ("was hungry"): left alone
                continue
            span = context_span(i, names, nps, self.max_span, written) if offsets else None
            if span is None:  # a sentence too short for a phrase short of itself (or leaves not spelling it)
                filtered["no phrase"] += 1
                continue
            slot = Slot(k, i, tag, leaf, word, names[i - 1] if i > 0 else None,
                        names[i + 1] if i + 1 < len(leaves) else None, names[head] if head is not None else None,
                        offsets[i], (span[0], offsets[span[1]][0], offsets[span[2] - 1][1]),
                        self._governor(i, names, nps) if tag in NOUN_TAGS else (i, head + 1), [], nth)
            for new in dict.fromkeys(self._proposals(slot, by_tag, p.sentence, filtered)):
                if new == word or not self._replaceable(new):
                    filtered["word"] += 1
                elif slot.left is not None and slot.left.lower() in ("a", "an") and not article_fits(slot.left, new):
                    filtered["article"] += 1
                else:
                    slot.proposals.append(new)
            out.append(slot)
        return out

    def _governor(self, i: int, names: Sequence[str], nps: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
        """The leaves from a noun to the nearest content word (a lowercase alphabetic non-stop word) outside the
        smallest noun phrase holding it: before it (the verb or the noun a preposition hangs from), else after
        it; None if there is none."""
        a, b = min((r for r in nps if r[0] <= i < r[1]), key=lambda r: r[1] - r[0], default=(i, i + 1))
        for k in itertools.chain(range(a - 1, -1, -1), range(b, len(names))):
            if self._replaceable(names[k].lower()):
                return (k, i + 1) if k < i else (i, k + 1)
        return None

    def _seen_with_governor(self, p: Parsed, slot: Slot, new: str, filtered: Counter) -> bool:
        """Whether the corpus has the new word as the mutant uses it with the word governing it: the words from
        one to the other, verbatim when they are at most `near` + 1, else the two at most `near` apart."""
        natural = self.natural()
        if not self.near or natural is None or slot.governor is None:
            return True
        a, b = slot.governor
        names = [w.lower() for w in self._names[slot.k][a:b]]
        names[slot.i - a] = new
        if len(names) <= self.near + 1:
            seen = natural.seen_phrase(words_of(" ".join(names)))
        else:
            seen = natural.seen_near(names[0], names[-1], self.near)
        if not seen:
            filtered["governor"] += 1
        return seen

    def _case(self, p: Parsed, slot: Slot, new: str) -> tuple[Case, int] | None:
        """The case replacing the slot's word by `new`, and where the new word starts in the mutant."""
        written = new[0].upper() + new[1:] if slot.leaf[0].isupper() else new
        s, e = slot.at
        mutant = p.sentence[:s] + written + p.sentence[e:]
        if mutant == p.sentence:
            return None
        kind, a, b = slot.span
        phrases = (p.sentence[a:b], p.sentence[a:s] + written + p.sentence[e:b])
        info = {"replaced": [slot.word, new], "tag": slot.tag, "in_context": kind, "phrases": list(phrases)}
        mark = closing(p.sentence)
        if mark:  # the phrases again, closed as the sentence is: a question's phrase translated as a question
            phrases += (phrases[0] + mark, phrases[1] + mark)
            info["closing"] = mark
        return Case(self.name, p.sentence, (("original", p.sentence), ("mutant", mutant)),
                    (p.sentence, mutant, *phrases), info), s

    def _natural_enough(self, p: Parsed, mutant: str, at: int, filtered: Counter) -> bool:
        natural = self.natural()
        if self.lm_max_drop is None or natural is None:
            return True
        if natural.drop(p.sentence, mutant, at) > self.lm_max_drop:
            filtered["lm"] += 1
            return False
        return True

    def cases(self, parsed: Sequence[Parsed]) -> list[Case]:
        leaves_per_sentence = []
        for p in parsed:
            try:
                leaves_per_sentence.append(tagged_leaves(p.tree))
            except TreeSyntaxError as e:
                raise UserError(f"{p.where}: the tree for this sentence cannot be read ({e}): {p.tree[:120]!r}") from None
        by_tag = self._vocabulary(leaves_per_sentence)
        self._names = [[w for _, w, _ in leaves] for leaves in leaves_per_sentence]
        filtered = Counter()
        slots = [slot for k, (p, leaves) in enumerate(zip(parsed, leaves_per_sentence))
                 for slot in self._slots(p, k, leaves, by_tag, filtered)]
        index = self._index(leaves_per_sentence, slots)
        out: dict[str, Case] = {}
        made = Counter()
        for slot in slots:
            p = parsed[slot.k]
            if made[slot.k] >= self.max_mutants:
                continue
            ranked = []
            for order, new in enumerate(slot.proposals):
                score = self._score(index, slot, new)
                if score < self.min_context:
                    filtered["context"] += 1
                else:
                    tie = order if self.source == "vectors" else -index.freq[new]
                    ranked.append((-score, tie, new))
            kept = 0
            for _, _, new in sorted(ranked):
                if kept >= self.per_word:
                    break
                if not self._seen_with_governor(p, slot, new, filtered):
                    continue
                built = self._case(p, slot, new)
                if built is None:
                    filtered["not found"] += 1
                elif self._natural_enough(p, built[0].sides[1][1], built[1], filtered) and built[0].id not in out:
                    out[built[0].id] = built[0]
                    made[slot.k] += 1
                    kept += 1
        considered = filtered.pop("considered", None)
        self._counts = {"mutants": len(out), "candidates": self.source,
                        **({"considered": considered} if considered is not None else {}),
                        "filtered": dict(filtered),
                        "in_context": dict(Counter(c.info["in_context"] for c in out.values()))}
        return list(out.values())

    # ---- distance

    def _bag(self, text: str, unit: str | None = None) -> Counter:
        return Counter(t for t in tokens(text, unit or self.unit) if t not in self.stop_tokens and not t.isspace())

    def _changes(self, before: str, after: str) -> tuple[Counter, Counter, set[str], set[str]]:
        """What `before` has that `after` lacks and the reverse, in the relation's tokens, then in characters."""
        x, y = self._bag(before), self._bag(after)
        cx, cy = (x, y) if self.unit == "char" else (self._bag(before, "char"), self._bag(after, "char"))
        return x - y, y - x, cx - cy, cy - cx

    def check(self, case: Case, translation: Mapping[str, str]) -> Check:
        """Each of the case's contexts (the phrase, then the phrase closed as the sentence is) gives W, what the
        original phrase's translation has that the mutant phrase's lacks, and W', the reverse. Equal sentence
        translations while a context's W and W' differ: the replacement was ignored (the largest |W| + |W'|).
        Otherwise the distance is what changed beyond the word's own translation as the context that explains
        the most translates it (the smallest over the contexts): a translator may translate a phrase alone
        otherwise than its sentence does (a question's "how many" with a measure word, a fragment's without).
        With jieba words, a word of T - T' - W counts only when it holds a character that the characters' own
        difference leaves unexplained: jieba may cut the same characters otherwise beside another word (the
        sentence's "信有" where the phrase ends in "信"), and a translator that renders each word one way
        everywhere is then never flagged."""
        original, mutant, *contexts = case.texts
        differences = [self._changes(translation[phrase], translation[new_phrase])
                       for phrase, new_phrase in zip(contexts[::2], contexts[1::2])]
        if squeeze(translation[original]) == squeeze(translation[mutant]):
            found = max((tuple(sorted(w.elements())) + tuple(sorted(w2.elements())) for w, w2, _, _ in differences),
                        key=len)
            return Check(len(found), ("replacement ignored", *found)) if found else Check(0)
        t, t2, c, c2 = self._changes(translation[original], translation[mutant])
        checks = []
        for w, w2, cw, cw2 in differences:
            beyond, beyond2 = set(c - cw), set(c2 - cw2)
            evidence = (tuple(x for x in sorted((t - w).elements()) if beyond.intersection(x))
                        + tuple(x for x in sorted((t2 - w2).elements()) if beyond2.intersection(x)))
            checks.append(Check(len(evidence), evidence))
        return min(checks, key=lambda check: check.distance)

    def counts(self) -> dict:
        return dict(self._counts)
