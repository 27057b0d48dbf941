"""What keeps a word replacement natural, learned offline from the user's own English (the training corpus):
word vectors (gensim's Word2Vec) whose neighbours are the candidates, the tags a tagger gives each word in that
corpus (a candidate must mostly be used with the replaced word's tag), and a trigram language model (counts,
interpolated absolute discounting) that rejects a mutant whose new word fits its neighbours much worse than the
old word fitted them.

Vectors and tags take a minute on 30k lines; they are cached in `cache_dir` under a hash of the corpus lines read
and the settings, so a second run reads them back (`corpus_key`, `cached_model`: the review memory's vectors are
cached the same way).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import pickle
import re
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

from repair.errors import UserError
from repair.fileio import write_json_atomic

log = logging.getLogger(__name__)

WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|\S")
BOS, EOS = "<s>", "</s>"
VERSION = 1  # of what is cached


def words_of(line: str) -> list[str]:
    """The lowercased tokens the vectors and the language model read."""
    return [w.lower() for w in WORD.findall(line)]


def default_cache_dir(name: str = "replace") -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repair" / name


def corpus_key(settings: Sequence, lines: Sequence[str]) -> str:
    """The cache key of what is made from `lines` with `settings` (JSON values): a hash of both."""
    return hashlib.sha256(json.dumps([VERSION, *settings]).encode()
                          + "\n".join(lines).encode("utf-8")).hexdigest()[:16]


Model = TypeVar("Model")


def cached_model(path: Path, train: Callable[[], Model], load: Callable[[str], Model]) -> Model:
    """The gensim model (Word2Vec, KeyedVectors) saved at `path`, else `train()`'s, saved there for the next run.

    Saved whole in one file (gensim would put large arrays beside it, under the temporary name) and renamed into
    place, so a reader finds the whole model or none. One that cannot be read is made again; one that cannot be
    saved is used all the same (the log says so).
    """
    if path.is_file():
        try:
            return load(str(path))
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError) as e:
            log.warning("%s cannot be read (%s); making it again", path, e)
    model = train()
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        model.save(str(tmp), sep_limit=2**62)
        os.replace(tmp, path)
    except OSError as e:
        log.warning("could not cache %s (%s); it is made again next time", path, e)
        tmp.unlink(missing_ok=True)
    return model


def _stable_hash(text: str) -> int:
    """Word2Vec seeds each word's vector with this (Python's own hash changes from one process to the next)."""
    return zlib.crc32(text.encode("utf-8"))


class NGramLM:
    """A trigram model of lowercased tokens with interpolated absolute discounting down to an add-one unigram."""

    def __init__(self, lines: Iterable[Sequence[str]], discount: float = 0.75):
        self.d = discount
        self.uni: Counter = Counter()
        self.ngrams: dict[int, Counter] = {2: Counter(), 3: Counter()}
        self.context: dict[int, Counter] = {2: Counter(), 3: Counter()}  # c(h) for h of length n-1
        self.types: dict[int, Counter] = {2: Counter(), 3: Counter()}  # distinct words after h
        for toks in lines:
            padded = [BOS, BOS, *toks, EOS]
            self.uni.update(padded[2:])
            for n in (2, 3):
                for j in range(2, len(padded)):
                    gram = tuple(padded[j - n + 1:j + 1])
                    if self.ngrams[n][gram] == 0:
                        self.types[n][gram[:-1]] += 1
                    self.ngrams[n][gram] += 1
                    self.context[n][gram[:-1]] += 1
        self.total = sum(self.uni.values())

    def unigram(self, w: str) -> float:
        return (self.uni[w] + 1) / (self.total + len(self.uni) + 1)

    def prob(self, w: str, history: tuple[str, ...]) -> float:
        p = self.unigram(w)
        for n in (2, 3):
            h = history[len(history) - n + 1:]
            c = self.context[n][h]
            if c:
                p = max(self.ngrams[n][(*h, w)] - self.d, 0) / c + self.d * self.types[n][h] / c * p
        return p

    def fit(self, toks: Sequence[str], i: int) -> tuple[float, int]:
        """How well token i fits its neighbours: the log-probability of it and the two tokens after it (those
        whose history holds it), less its own unigram log-probability (a rare word is not unnatural for being
        rare); and how many tokens that sums."""
        padded = [BOS, BOS, *toks, EOS]
        at = i + 2
        last = min(at + 2, len(padded) - 1)
        total = sum(math.log(self.prob(padded[j], tuple(padded[j - 2:j]))) for j in range(at, last + 1))
        return total - math.log(self.unigram(padded[at])), last - at + 1

    def drop(self, before: Sequence[str], after: Sequence[str], i: int) -> float:
        """How much worse (nats per token) token i of `after` fits than token i of `before` (same length)."""
        old, n = self.fit(before, i)
        new, _ = self.fit(after, i)
        return (old - new) / n


class Natural:
    """Candidates and the language model from a corpus: `neighbours` (same tag, nearest vectors) and `drop`."""

    def __init__(self, lines: list[str], *, cache_dir: str | Path | None = None, tagger: str | None = None,
                 neighbours: int = 20, min_count: int = 3, min_tag_share: float = 0.5, seed: int = 1):
        if not lines:
            raise UserError("purity.replace: candidates=vectors and the language-model filter need an English "
                            "corpus (purity.replace.corpus=FILE, one sentence a line); none was given or it is empty")
        self.neighbours, self.min_tag_share = neighbours, min_tag_share
        tokenized = [words_of(line) for line in lines]
        self.lm = NGramLM(tokenized)
        key = corpus_key([tagger, min_count, seed], lines)
        self.cache = Path(cache_dir) if cache_dir else default_cache_dir()
        self._key, self._tokenized, self._lines = key, tokenized, lines
        self._tagger, self._min_count, self._seed = tagger, min_count, seed
        self._vectors = None
        self._pairs: Counter | None = None
        self._text: str | None = None
        self._tags: dict[str, dict[str, int]] | None = None

    # ---- lazily built, cached

    def vectors(self):
        """The skip-gram model (gensim's Word2Vec, negative sampling): its word vectors and output weights."""
        if self._vectors is None:
            from gensim.models import Word2Vec

            self._vectors = cached_model(self.cache / f"{self._key}.word2vec", self._train_vectors, Word2Vec.load)
        return self._vectors

    def _train_vectors(self):
        from gensim.models import Word2Vec

        log.info("training word vectors on %d lines of English (cached in %s)", len(self._lines), self.cache)
        if not any(n >= self._min_count for n in self.lm.uni.values()):
            raise UserError(f"purity.replace: the corpus ({len(self._lines)} lines) has no word seen "
                            f"{self._min_count} times, too little for word vectors; give a larger one "
                            "(the training English) or use candidates=context")
        return Word2Vec(self._tokenized, vector_size=100, window=5, min_count=self._min_count, sg=1, negative=5,
                        epochs=10, seed=self._seed, workers=1, hashfxn=_stable_hash)

    def tags(self) -> dict[str, dict[str, int]]:
        """{lowercased word: {Penn tag: count}} over the corpus, by spaCy's tagger."""
        if self._tags is None:
            path = self.cache / f"{self._key}.tags.json"
            if path.is_file():
                self._tags = json.loads(path.read_text(encoding="utf-8"))
            else:
                self._tags = self._tag_corpus()
                write_json_atomic(path, self._tags)
        return self._tags

    def _tag_corpus(self) -> dict[str, dict[str, int]]:
        from repair.purity.parsers.spacy import DEFAULT_MODEL, load_spacy

        log.info("tagging %d lines of English for the replacement candidates' tags", len(self._lines))
        nlp = load_spacy(self._tagger or DEFAULT_MODEL, exclude=("ner", "lemmatizer", "parser"))
        counts: dict[str, Counter] = defaultdict(Counter)
        for doc in nlp.pipe(self._lines, batch_size=512):
            for t in doc:
                counts[t.text.lower()][t.tag_] += 1
        return {w: dict(c) for w, c in counts.items()}

    # ---- candidates and filters

    def has_tag(self, word: str, tag: str) -> bool:
        """Whether the corpus mostly uses `word` with `tag` (at least `min_tag_share` of its uses)."""
        seen = self.tags().get(word.lower())
        return bool(seen) and seen.get(tag, 0) >= self.min_tag_share * sum(seen.values())

    def similar(self, word: str) -> list[str]:
        """The word's nearest neighbours in the vectors, closest first ([] for a word it does not know)."""
        kv = self.vectors().wv
        if word.lower() not in kv.key_to_index:
            return []
        return [w for w, _ in kv.most_similar(word.lower(), topn=self.neighbours)]

    def drop(self, original: str, mutant: str, char_at: int) -> float:
        """The language model's per-token drop from `original` to `mutant`, the word changed at `char_at`."""
        i = len(WORD.findall(original[:char_at]))
        return self.lm.drop(words_of(original), words_of(mutant), i)

    def seen_near(self, first: str, then: str, within: int = 4) -> int:
        """How many times the corpus has `then` at most `within` tokens after `first` (lowercased)."""
        if self._pairs is None:
            self._pairs = Counter()
            for toks in self._tokenized:
                for j, t in enumerate(toks):
                    self._pairs.update((t, u) for u in toks[j + 1:j + 1 + within])
        return self._pairs[(first.lower(), then.lower())]

    def seen_phrase(self, toks: Sequence[str]) -> bool:
        """Whether the corpus has these lowercased tokens one after another."""
        if self._text is None:
            self._text = "\n" + "\n".join(" ".join(t) for t in self._tokenized) + "\n"
        return re.search(r"[\n ]" + re.escape(" ".join(toks)) + r"[\n ]", self._text) is not None
