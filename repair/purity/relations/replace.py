"""Word replacement (the TransRepair / CAT family): replacing one noun or adjective of a sentence with another
of the same part of speech that fits the context should change the translation only where that word is.

A case is (original sentence, mutant). Its distance, in tokens (characters or jieba words, stop tokens left
out): the tokens of the original's translation that the mutant's lacks, beyond those of the replaced word's own
translation, plus the tokens of the mutant's translation that the original's lacks, beyond those of the new
word's own translation. Each word is translated alone for this.

Candidates, found offline:
- `context` (`auto` without a lexicon): words tagged with the same part of speech in the sentences under test, ranked by how many
  of the replaced word's two neighbours they are seen beside in the training corpus and the sentences under test.
- `lexicon` (`auto` with one): a JSONL file of interchangeable words, `{"tag": "NN", "words": [...]}` per line (the demo's grammar
  writes one); candidates are the other words of a group holding the word with the same tag, ranked as above.
- `mlm`: a masked language model (`transformers` and a local model folder, `mlm_model=`), its proposals kept when
  seen with the same part of speech in the sentences under test.
Filters: same Penn tag (NN, NNS, JJ: so a plural stays plural and the verb agrees), a lowercase alphabetic word of
2+ letters that is not a stop word, an adjective only inside a noun phrase (attributive), "a"/"an" before it still
right for the new word (by its first letter), a capitalized word only at the sentence's start, and the new word
seen in at least `min_context` (default 2) of the word's two contexts, in the training corpus or the sentences
under test: its left neighbour, and for an adjective the noun it modifies (seen right before it: the
adjective-noun dependency), for a noun its right neighbour.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from repair.errors import UserError
from repair.fileio import iter_jsonl, read_text_lines
from repair.purity.check import DEFAULT_STOP_TOKENS, tokens
from repair.purity.relations.base import Case, Check, Parsed, Relation, Role
from repair.purity.relations.rti import stopword_set
from repair.purity.rti import Node, TreeSyntaxError, clean_tree, parse_tree


TAGS = ("NN", "NNS", "JJ")
SOURCES = ("auto", "context", "lexicon", "mlm")
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|\S")
_ALPHA = re.compile(r"[a-z]{2,}")


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
        self.add(_WORD.findall(line))


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
                 mlm_model: str | None = None):
        if candidates not in SOURCES:
            raise UserError(f"purity.replace.candidates={candidates!r}: choose one of {', '.join(SOURCES)}")
        if candidates == "auto":
            candidates = "lexicon" if lexicon else "context"
        if candidates == "lexicon" and not lexicon:
            raise UserError("purity.replace.candidates=lexicon needs purity.replace.lexicon=FILE.jsonl")
        bad = [t for t in tags if t not in TAGS]
        if bad:
            raise UserError(f"purity.replace.tags: {bad} not supported; choose among {', '.join(TAGS)}")
        for key, value, least in (("per_word", per_word, 1), ("max_mutants", max_mutants, 1),
                                  ("min_context", min_context, 0), ("corpus_lines", corpus_lines, 0)):
            if not isinstance(value, int) or value < least:
                raise UserError(f"purity.replace.{key}={value!r}: give a whole number >= {least}")
        if min_context > 2:
            raise UserError(f"purity.replace.min_context={min_context}: a word has two neighbours; give 0, 1 or 2")
        self.unit = unit
        self.stop_tokens = frozenset(stop_tokens)
        self.stopwords = stopword_set(stopwords)
        self.source = candidates
        self.lexicon = read_lexicon(lexicon) if lexicon else None
        self.corpus = [corpus] if isinstance(corpus, (str, Path)) else list(corpus or [])
        self.corpus_lines = corpus_lines
        self.per_word, self.max_mutants, self.min_context = per_word, max_mutants, min_context
        self.tags = tuple(tags)
        self.mlm = MaskedLM(mlm_model) if candidates == "mlm" else None
        self._counts: dict = {}

    # ---- candidates

    def _vocabulary(self, leaves_per_sentence: list[list[tuple]]) -> dict[str, Counter]:
        by_tag: dict[str, Counter] = {t: Counter() for t in self.tags}
        for leaves in leaves_per_sentence:
            for tag, word, _ in leaves:
                if tag in by_tag and self._replaceable(word):
                    by_tag[tag][word] += 1
        return by_tag

    def _index(self, leaves_per_sentence: list[list[tuple]], asked: list[tuple]) -> ContextIndex:
        """Reads the sentences and the corpus once, for the pairs the candidates need."""
        pairs, words = set(), set()
        for _, _, left, right, head, proposals in asked:
            after = head if head is not None else right
            for new in proposals:
                words.add(new)
                if left is not None:
                    pairs.add((left.lower(), new))
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
    def _score(index: ContextIndex, left: str | None, new: str, right: str | None, head: str | None) -> int:
        """How many of the word's contexts the new word is seen in: its left neighbour, and for an attributive
        adjective the noun it modifies (seen right after it), for any other word its right neighbour."""
        after = head if head is not None else right
        return ((left is not None and (left.lower(), new) in index.seen)
                + (after is not None and (new, after.lower()) in index.seen))

    def _replaceable(self, word: str) -> bool:
        return bool(_ALPHA.fullmatch(word)) and word not in self.stopwords

    def _proposals(self, tag: str, word: str, by_tag: dict[str, Counter], sentence: str, nth: int) -> list[str]:
        if self.source == "lexicon":
            return list(self.lexicon.get((tag, word), []))
        if self.source == "mlm":
            return [w for w in self.mlm.propose(sentence, word, nth) if w in by_tag[tag]]
        return list(by_tag[tag])

    def cases(self, parsed: Sequence[Parsed]) -> list[Case]:
        leaves_per_sentence = []
        for p in parsed:
            try:
                leaves_per_sentence.append(tagged_leaves(p.tree))
            except TreeSyntaxError as e:
                raise UserError(f"{p.where}: the tree for this sentence cannot be read ({e}): {p.tree[:120]!r}") from None
        by_tag = self._vocabulary(leaves_per_sentence)
        filtered = Counter()
        asked = []  # (sentence index, leaf index, left, right, head, proposals) per replaceable word
        for k, (p, leaves) in enumerate(zip(parsed, leaves_per_sentence)):
            seen_word: Counter = Counter()
            for i, (tag, leaf, head) in enumerate(leaves):
                nth = seen_word[leaf]
                seen_word[leaf] += 1
                word = leaf.lower() if i == 0 else leaf
                if tag not in self.tags or not self._replaceable(word):
                    continue
                if tag == "JJ" and head is None:
                    filtered["predicative"] += 1  # an adjective outside a noun phrase ("was hungry"): left alone
                    continue
                left = leaves[i - 1][1] if i > 0 else None
                right = leaves[i + 1][1] if i + 1 < len(leaves) else None
                proposals = []
                for new in dict.fromkeys(self._proposals(tag, word, by_tag, p.sentence, nth)):
                    if new == word or not self._replaceable(new):
                        filtered["word"] += 1
                    elif left is not None and left.lower() in ("a", "an") and not article_fits(left, new):
                        filtered["article"] += 1
                    else:
                        proposals.append(new)
                asked.append((k, i, left, right, leaves[head][1] if head is not None else None, proposals))
        index = self._index(leaves_per_sentence, asked)
        out: dict[str, Case] = {}
        made = Counter()
        for k, i, left, right, head, proposals in asked:
            p, (tag, leaf, _) = parsed[k], leaves_per_sentence[k][i]
            if made[k] >= self.max_mutants:
                continue
            word = leaf.lower() if i == 0 else leaf
            nth = sum(1 for _, w, _ in leaves_per_sentence[k][:i] if w == leaf)
            ranked = []
            for new in proposals:
                score = self._score(index, left, new, right, head)
                if score < self.min_context:
                    filtered["context"] += 1
                else:
                    ranked.append((-score, -index.freq[new], new))
            for _, _, new in sorted(ranked)[:self.per_word]:
                written = new[0].upper() + new[1:] if leaf[0].isupper() else new
                mutant = replace_word(p.sentence, leaf, nth, written)
                if mutant is None or mutant == p.sentence:
                    filtered["not found"] += 1
                    continue
                case = Case(self.name, p.sentence, (("original", p.sentence), ("mutant", mutant)),
                            (p.sentence, mutant, word, new), {"replaced": [word, new], "tag": tag})
                if case.id not in out:
                    out[case.id] = case
                    made[k] += 1
        self._counts = {"mutants": len(out), "filtered": dict(filtered), "candidates": self.source}
        return list(out.values())

    # ---- distance

    def _bag(self, text: str) -> Counter:
        return Counter(t for t in tokens(text, self.unit) if t not in self.stop_tokens and not t.isspace())

    def check(self, case: Case, translation: Mapping[str, str]) -> Check:
        original, mutant, word, new = case.texts
        a, b = self._bag(translation[original]), self._bag(translation[mutant])
        lost = a - b - self._bag(translation[word])
        gained = b - a - self._bag(translation[new])
        evidence = tuple(sorted(lost.elements())) + tuple(sorted(gained.elements()))
        return Check(len(evidence), evidence)

    def counts(self) -> dict:
        return dict(self._counts)
