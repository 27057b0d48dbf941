"""Review memory: what a reviewer's corrections taught, carried to the sides reviewed after them as suggestions.

A team's own text repeats its field's words, and a model that gets such a word wrong gets it wrong in every
sentence that holds it: once a reviewer has corrected it, the next side holding the word should not have to be
typed again. The memory learns, from each correction in review order, the terms it put in (words of the
correction the model's translation lacked, as the measures' term recall counts them) for the English words of
its source. A word's terms are those that every correction so far whose source holds the word contains, and
that no correction whose source lacks the word contains: one correction teaches its terms to all its words
(水手 for "hungry", "old" and "sailor" of "a hungry old sailor"), and the next corrections sort them out.
Only words the model seldom saw are learnt (fewer than `rare` times in the training English, where it is
known): a term for a common word is more likely the sentence's than the word's.

A later side whose source holds a learnt word, and whose translation lacks its terms, is offered the model's best
translation that holds them (lexically constrained beam search) among the hypotheses that stay near its own
translation (at most the terms' characters + `slack` edits away): the word put right, the rest as it was.

A model that does not know a word often garbles the sentence around it, and no constrained search of that model
mends the rest. So the memory also translates the sentence with the word swapped for words the model knows that
are used like it (`Substitutes`: nearest neighbours in word vectors of the training English and the texts under
review, of the same tag in the sentence), puts the term in place of the swapped word's own translation, and
offers the candidate the model scores best for the real sentence (before the constrained search's, where there
is one). A Chinese noun takes its measure word (三名水手, 几本小说); where the corrections so far agree on the one
before a term, a suggestion takes it too.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from repair.errors import UserError
from repair.stats import edit_distance, squeeze

log = logging.getLogger(__name__)

ORIGIN = "the model's translation made to hold {terms}: what earlier corrections taught for {words} (review memory)"
SWAP_ORIGIN = ("the model's translation with {swaps}, their translation made {terms}: what earlier corrections "
               "taught for {words} (review memory)")

VECTORS = {"vector_size": 100, "window": 5, "min_count": 2, "sg": 1, "negative": 5}  # the memory's word vectors
NUMERALS = frozenset("一二三四五六七八九十两几这那每哪某各半百千万")
MEASURE_WORDS = frozenset("个位名只本张辆座家头棵朵匹条首幅间件把台部支块封所面架艘双对杯瓶碗片根颗粒层门扇盏顶口份篇册套群批株尾枚串束道项栋")
CLAUSE_ENDS = frozenset("，。,.;；!?！？")


def measure_word_at(text: str, pos: int, reach: int = 14) -> int | None:
    """Where the measure word of the noun at `pos` is: one right after a numeral or demonstrative, at most
    `reach` characters back, with at most one 的 between (三名饥饿的水手; in 一张床下面的黑色小说 张 is the bed's),
    or None."""
    de = 0
    for k in range(pos - 1, max(0, pos - reach), -1):
        de += text[k] == "的"
        if text[k] in CLAUSE_ENDS or de > 1:
            return None
        if text[k] in MEASURE_WORDS and text[k - 1] in NUMERALS:
            return k
    return None


class ReviewMemory:
    """The terms learnt so far, per English word (a final s aside). `seen`: word counts of the training English
    (None: every word may be learnt); `rare`: only words seen fewer times are learnt (0: any word). `aligner`: a
    repair.review.align.PhraseAligner (review.projection): a word learns only the terms of a correction that lie in
    the stretch its word aligns to (a sentence's correction from a reference rewrites much more than the word's
    translation: without it, `american` learnt 中心思想 and 民主 from one correction), and none where the word
    aligns to nothing sure enough (`min_confidence`)."""

    def __init__(self, stop_tokens: Sequence[str] = (), seen: Mapping[str, int] | None = None, rare: int = 100,
                 aligner=None, min_confidence: float = 0.5):
        from repair.purity.rti import english_stopwords

        self.stop_tokens = tuple(stop_tokens)
        self.stopwords = english_stopwords()
        self.seen, self.rare = seen, rare
        self.aligner, self.min_confidence = aligner, min_confidence
        self.candidates: dict[str, set[str]] = {}
        self.learnt: list[tuple[frozenset[str], str]] = []  # (a corrected source's words, its correction squeezed)
        self._known: set[str] = set()  # sources learnt from (a source corrected twice counts once)
        self._words: dict[str, frozenset[str]] = {}  # per source: each side is asked about after every correction

    def words(self, source: str) -> frozenset[str]:
        words = self._words.get(source)
        if words is None:
            from repair.text import content_words, singular

            words = self._words[source] = frozenset(singular(w) for w in content_words(source, self.stopwords))
        return words

    def learn(self, source: str, translation: str, correction: str) -> None:
        """One correction of `source`, whose model translation was `translation`."""
        from repair.measures import correction_terms

        if source in self._known or not correction.strip():
            return
        self._known.add(source)
        words = self.words(source)
        self.learnt.append((words, squeeze(correction)))
        terms = correction_terms([{"translation": translation, "correction": correction}], self.stop_tokens)
        learning = [w for w in sorted(words) if terms and (self.seen is None or not self.rare or
                                                             self.seen.get(w, 0) < self.rare)]
        spans = self.aligned(source, correction, learning) if self.aligner is not None and learning else None
        for w in learning:
            mine = terms if spans is None else {t for t in terms if spans.get(w) and (t in spans[w] or spans[w] in t)}
            if mine:
                self.candidates.setdefault(w, set()).update(mine)

    def aligned(self, source: str, correction: str, words: Sequence[str]) -> dict[str, str | None]:
        """Per word of `source` (as `words` spells it: lower case, singular), the stretch of `correction` it aligns
        to, None where none is sure enough."""
        import re

        from repair.text import singular

        written = {}
        for token in re.findall(r"[A-Za-z][A-Za-z'-]*", source):  # the word as the sentence writes it
            written.setdefault(singular(token.lower()), token)
        asked = [w for w in words if w in written]
        found = self.aligner.project([(source, correction, written[w]) for w in asked]) if asked else []
        out: dict[str, str | None] = dict.fromkeys(words)
        for w, p in zip(asked, found):
            out[w] = squeeze(p.text) if p is not None and p.text and p.confidence >= self.min_confidence else None
        return out

    def measure_word(self, term: str) -> str | None:
        """The measure word the corrections so far put before `term`: at least two of them, two thirds or more."""
        seen: Counter = Counter()
        for _, corrected in self.learnt:
            at = corrected.find(term)
            k = measure_word_at(corrected, at) if at >= 0 else None
            if k is not None:
                seen[corrected[k]] += 1
        if not seen:
            return None
        word, n = seen.most_common(1)[0]
        return word if n >= 2 and 3 * n >= 2 * sum(seen.values()) else None

    def with_measure_words(self, text: str, terms: Sequence[str]) -> str:
        """`text` with the measure word before each term made the one the corrections agree on."""
        for term in terms:
            at, want = text.find(term), self.measure_word(term)
            k = measure_word_at(text, at) if at >= 0 and want else None
            if k is not None and text[k] != want:
                text = text[:k] + want + text[k + 1:]
        return text

    def terms(self, source: str, translation: str) -> dict[str, list[str]]:
        """{word: its terms that `translation` lacks}, for the learnt words of `source`."""
        learnt = self.candidates.keys() & self.words(source)
        if not learnt:
            return {}
        have = squeeze(translation)
        out: dict[str, list[str]] = {}
        for w in sorted(learnt):
            ts = [t for t in sorted(self.candidates[w]) if t not in have
                  and all((t in corrected) == (w in ws) for ws, corrected in self.learnt)]
            if ts:
                out[w] = ts
        return out


class Substitutes:
    """Words the model knows that are used like a given word: its nearest neighbours in word vectors (gensim's
    skip-gram, as the replacement relation's) trained on `corpus()` (the training English) and the texts under
    review (`know`), where a rare word is seen in enough contexts; each seen `rare` times or more in the training
    English (`seen`), and tagged as the word was where it stands in the sentence (spaCy's tagger). Vectors and
    tagger are made when first needed; the vectors are cached in `cache_dir` (None: ~/.cache/repair/memory) under
    a hash of their lines and settings, as the replacement relation's are, so a review of the same texts with the
    same training English reads them back (`built`: "trained" or "cached", once made)."""

    def __init__(self, corpus: Callable[[], Sequence[str]], seen: Mapping[str, int] | None, rare: int = 100,
                 k: int = 8, tagger: str | None = None, epochs: int = 10, seed: int = 1,
                 cache_dir: str | os.PathLike | None = None):
        from repair.purity.relations.natural import default_cache_dir

        self.corpus, self.seen, self.rare, self.k = corpus, seen or {}, rare, k
        self.tagger_name, self.epochs, self.seed = tagger, epochs, seed
        self.cache = Path(cache_dir) if cache_dir else default_cache_dir("memory")
        self.known: list[str] = []
        self.built: str | None = None
        self._vectors = self._nlp = None
        self._lock = threading.Lock()

    def know(self, texts: Sequence[str]) -> None:
        if self._vectors is None:
            self.known.extend(texts)

    def warm(self) -> None:
        """Vectors and tagger made now (the review page: in the background while the first issues are judged);
        what fails is said where they are used."""
        try:
            self._model()
            self.nlp()
        except Exception:  # noqa: BLE001 (said again, once, by the suggester that needs them)
            pass

    def _model(self):
        with self._lock:
            return self._train()

    def _train(self):
        if self._vectors is None:
            from gensim.models import KeyedVectors

            from repair.purity.relations.natural import cached_model, corpus_key

            began = time.perf_counter()
            texts = [*self.corpus(), *dict.fromkeys(self.known)]
            settings = ["review memory", sorted(VECTORS.items()), self.epochs, self.seed]
            path = self.cache / f"{corpus_key(settings, texts)}.memory.kv"
            self.built = "cached"
            self._vectors = cached_model(path, lambda: self._word2vec(texts), KeyedVectors.load)
            log.info("review memory: word vectors of %d lines %s in %.1f s (%s)", len(texts),
                     self.built, time.perf_counter() - began, path)
        return self._vectors

    def _word2vec(self, texts: Sequence[str]):
        from gensim.models import Word2Vec

        from repair.purity.relations.natural import _stable_hash, words_of

        self.built = "trained"
        logging.getLogger("gensim").setLevel(logging.WARNING)  # its progress lines are not the review's
        return Word2Vec([words_of(x) for x in texts], **VECTORS, epochs=self.epochs, seed=self.seed, workers=1,
                        hashfxn=_stable_hash).wv

    def nlp(self):
        with self._lock:
            return self._load_tagger()

    def _load_tagger(self):
        if self._nlp is None:
            from repair.purity.parsers.spacy import DEFAULT_MODEL, load_spacy

            self._nlp = load_spacy(self.tagger_name or DEFAULT_MODEL, exclude=("ner", "lemmatizer", "parser"))
        return self._nlp

    def neighbours(self, word: str, avoid: set[str], article: str | None = None) -> list[str]:
        """Up to 4k candidates for `word`, nearest first (the tag is checked by `swaps`)."""
        from repair.purity.relations.replace import article_fits
        from repair.text import singular

        kv = self._model()
        if word not in kv.key_to_index:
            return []
        out = []
        for w, _ in kv.most_similar(word, topn=50):
            if (not w.isalpha() or w in avoid or self.seen.get(singular(w), 0) < self.rare
                    or (article and not article_fits(article, w))):
                continue
            out.append(w)
            if len(out) >= 4 * self.k:
                break
        return out

    def swaps(self, source: str, learnt: Callable[[str], bool]) -> list[tuple[list[tuple[str, str]], str]]:
        """Up to k variants of `source`, each with every word `learnt` says yes to swapped for a neighbour:
        [([(word, neighbour), ...], variant)]. [] where a word has no neighbour of its tag."""
        doc = self.nlp()(source)
        toks = list(doc)
        at = [t.i for t in toks if t.is_alpha and learnt(t.text.lower())]
        if not at or len(at) > 3:
            return []
        avoid = {t.text.lower() for t in toks}
        options = []
        for i in at:
            before = toks[i - 1].text if i > 0 and toks[i - 1].lower_ in ("a", "an") else None
            cands = self.neighbours(toks[i].lower_, avoid, before)
            variants = [_swap(source, toks[i].idx, toks[i].text, c) for c in cands]
            fitting = [c for c, d in zip(cands, self.nlp().pipe(variants))
                       if len(d) == len(doc) and d[i].tag_ == toks[i].tag_][:self.k]
            if not fitting:
                return []
            options.append(fitting)
        out = []
        for n in range(min(map(len, options))):
            text, pairs = source, []
            for i, fitting in sorted(zip(at, options), reverse=True):  # from the end: offsets stay right
                text = _swap(text, toks[i].idx, toks[i].text, fitting[n])
                pairs.append((toks[i].text, fitting[n]))
            out.append((pairs[::-1], text))
        return out


def _contrast(out: str, others: Sequence[str]) -> tuple[int, str] | None:
    """Where `out` differs from the most similar of `others` (the translations of the same sentence with other
    words swapped in), when only one span differs: (offset, span), else None."""
    best = None
    for other in others:
        p = 0
        while p < min(len(out), len(other)) and out[p] == other[p]:
            p += 1
        s = 0
        while s < min(len(out), len(other)) - p and out[-1 - s] == other[-1 - s]:
            s += 1
        if p + s < len(out) and (best is None or p + s > best[0] + best[1]):
            best = (p, s)
    if best is None:
        return None
    p, s = best
    return p, out[p:len(out) - s]


def _swap(text: str, at: int, old: str, new: str) -> str:
    new = new.capitalize() if old[:1].isupper() else new
    return text[:at] + new + text[at + len(old):]


class MemorySuggester:
    """Suggestions from a ReviewMemory, searched by `searcher` (a Translator's searcher: fairseq's constrained
    beam search, whose translate and score are the model's own); `substitutes`: a Substitutes (None: no swapped
    translations); `cost` adds up what it took (seconds, searched), over this suggester and its fresh() ones."""

    def __init__(self, searcher, memory: ReviewMemory, beam: int = 5, slack: int = 2,
                 substitutes: Substitutes | None = None):
        self.fs, self.memory, self.beam, self.slack = searcher, memory, beam, slack
        self.substitutes = substitutes
        self.cost = {"seconds": 0.0, "searched": 0}
        self._cache: dict[tuple[str, str, tuple[str, ...]], dict | None] = {}
        self._swapped: dict[tuple[str, str, tuple[tuple[str, tuple[str, ...]], ...]], dict | None] = {}
        self._alone: dict[str, dict[str, str]] = {}  # per source (a scoped edit's model is the source's), word -> its translation

    def fresh(self) -> "MemorySuggester":
        """The same searcher with an empty memory (of the same settings); the searches already made are reused."""
        m = self.memory
        other = MemorySuggester(self.fs, ReviewMemory(m.stop_tokens, m.seen, m.rare, m.aligner, m.min_confidence),
                                self.beam, self.slack, self.substitutes)
        other._cache, other._swapped, other._alone, other.cost = self._cache, self._swapped, self._alone, self.cost
        return other

    def know(self, sources: Sequence[str]) -> None:
        """The texts under review, read by the word vectors that find a learnt word's substitutes."""
        if self.substitutes is not None:
            self.substitutes.know(sources)

    def suggest(self, sides: Sequence[tuple[str, str]]) -> list[dict | None]:
        """For each (source, translation): a suggestion {"text", "origin", "terms", "score"}, or None."""
        began = time.perf_counter()
        wanted = [self.memory.terms(s, t) for s, t in sides]
        keys = [(s, t, tuple(sorted({x for ts in w.values() for x in ts}))) for (s, t), w in zip(sides, wanted)]
        todo = [k for k in dict.fromkeys(keys) if k[2] and k not in self._cache]
        if todo:
            found = self.fs.translate_constrained([k[0] for k in todo], [list(k[2]) for k in todo],
                                                  beam=self.beam, nbest=self.beam, ordered=False)
            self.cost["searched"] += len(todo)
            for (source, translation, terms), hyps in zip(todo, found):
                near = [h for h in hyps if h.met and squeeze(h.text) != squeeze(translation)
                        and edit_distance(h.text, translation) <= sum(map(len, terms)) + self.slack]
                self._cache[(source, translation, terms)] = (
                    {"text": near[0].text, "terms": list(terms), "score": round(float(near[0].score), 4)} if near else None)
        out = []
        for (source, translation), key, w in zip(sides, keys, wanted):
            got = self._cache.get(key) if key[2] else None
            swapped = self._swap_suggestion(source, translation, w) if w else None
            if swapped is not None:
                out.append(swapped)
                continue
            if got is not None:
                text = self.memory.with_measure_words(got["text"], got["terms"])
                got = {**got, "text": text} if squeeze(text) != squeeze(translation) else None
            out.append(None if got is None else
                       {**got, "origin": ORIGIN.format(terms="、".join(got["terms"]), words=", ".join(sorted(w)))})
        self.cost["seconds"] += time.perf_counter() - began
        return out

    def _translate(self, texts: list[str], source: str) -> list[str]:
        """`texts` translated by the model that translates `source` (a scoped edit routes them as it)."""
        like = getattr(self.fs, "translate_like", None)
        return like(texts, source) if like is not None else self.fs.translate(texts)

    def _swap_suggestion(self, source: str, translation: str, wanted: dict[str, list[str]]) -> dict | None:
        """The best of the translations of `source` with its learnt words swapped (Substitutes), each swapped word's
        own translation replaced by a term of the word it stands for, measure words as the corrections have them."""
        import itertools

        from repair.text import singular

        if self.substitutes is None:
            return None
        key = (source, translation, tuple(sorted((w, tuple(ts)) for w, ts in wanted.items())))
        if key in self._swapped:
            return self._swapped[key]
        result = None
        try:
            variants = self.substitutes.swaps(source, lambda word: singular(word) in wanted)
        except (UserError, ImportError, OSError) as e:
            log.warning("review memory: no swapped words (%s); the constrained search's suggestions go on", e)
            self.substitutes = None
            return None
        if variants:
            outs = self._translate([v for _, v in variants], source)
            words = sorted({new for pairs, _ in variants for _, new in pairs} - set(self._alone.get(source, {})))
            self._alone.setdefault(source, {}).update(zip(words, self._translate(words, source)) if words else [])
            candidates: dict[str, tuple] = {}
            for k, ((pairs, _), out) in enumerate(zip(variants, outs)):
                alone = [self._alone[source][new] for _, new in pairs]
                if all(a and out.count(a) == 1 for a in alone) and len(set(alone)) == len(alone):
                    places = [(out.index(a), a) for a in alone]
                elif len(pairs) == 1 and (found := _contrast(out, [o for j, o in enumerate(outs) if j != k])):
                    places = [found]  # its own translation is not a part of the sentence's: where the variants differ
                else:
                    continue
                for terms in itertools.product(*[wanted[singular(old.lower())] for old, _ in pairs]):
                    text = out
                    for (at, a), term in sorted(zip(places, terms), reverse=True):
                        text = text[:at] + term + text[at + len(a):]
                    text = self.memory.with_measure_words(text, terms)
                    if squeeze(text) != squeeze(translation):
                        candidates.setdefault(text, (pairs, terms))
            if candidates:
                texts = list(candidates)
                scores = self.fs.score([source] * len(texts), texts)
                score, text = max(zip(scores, texts))
                pairs, terms = candidates[text]
                result = {"text": text, "terms": list(terms), "score": round(float(score), 4),
                          "origin": SWAP_ORIGIN.format(swaps=", ".join(f"{new} for {old}" for old, new in pairs),
                                                       terms="、".join(terms), words=", ".join(sorted(wanted)))}
        self._swapped[key] = result
        return result


class PageMemory:
    """The review page's memory: it learns the corrections saved so far in `store` (a CorrectionStore; each
    once, in the order saved) and offers its suggestions for the sides of the issues not judged yet (which the
    page offers before the issue's own). `suggester` None: no memory, nothing offered."""

    def __init__(self, suggester: MemorySuggester | None, issues: Sequence[dict], store):
        self.suggester, self.issues, self.store = suggester, issues, store
        self.learnt: set[tuple[str, str]] = set()
        if suggester is not None:
            suggester.know([s["source"] for i in issues for s in i["sides"]])
            if suggester.substitutes is not None:
                threading.Thread(target=suggester.substitutes.warm, name="memory-vectors", daemon=True).start()

    def offers(self) -> dict[str, dict[str, dict]]:
        """{issue id: {role: suggestion}} for the issues not judged yet."""
        if self.suggester is None:
            return {}
        issues, judged = self.issues, self.store.latest
        for c in self.store.corrections():
            if (c["source"], c["correction"]) not in self.learnt:
                self.learnt.add((c["source"], c["correction"]))
                self.suggester.memory.learn(c["source"], c.get("translation") or "", c["correction"])
        sides = [(i["id"], s["role"], s["source"], s["translation"]) for i in issues if i["id"] not in judged
                 for s in i["sides"]]
        found = self.suggester.suggest([(src, tr) for _, _, src, tr in sides]) if sides else []
        out: dict[str, dict[str, dict]] = {}
        for (iid, role, _, _), got in zip(sides, found):
            if got is not None:
                out.setdefault(iid, {})[role] = {**got, "role": role}
        return out
