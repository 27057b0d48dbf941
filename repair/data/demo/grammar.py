"""The demo's synchronous grammar: phrase trees that render themselves as English tokens and as Chinese.

Chinese moves noun modifiers before the noun with 的 (桌子上的三本红色的书), measure words follow the noun
(一位老师, 两座桥), event locations and times come before the verb (老师昨天在图书馆里读了一本书。).
Every sentence and every noun phrase a parser may cut from it has its translation (`Sentence.references`).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Iterator, Union

from repair.data.demo import lexicon as lex

# ----------------------------------------------------------------------------- the phrase trees

@dataclass(frozen=True)
class Noun:
    sg: str
    pl: str
    zh: str
    mw: str
    kind: str


@dataclass(frozen=True)
class Pre:
    """A word before the adjectives: a possessive, a determiner or a number."""

    en: str
    zh: str
    measure: bool      # a measure word follows in Chinese (一本, 三本, 这本)
    quantifies: bool   # counts the noun, so a plural person takes no 们
    possessive: bool = False


@dataclass(frozen=True)
class NP:
    head_en: str
    head_zh: str
    kind: str
    noun: Noun | None          # None for a name
    plural: bool = False
    pre: tuple[Pre, ...] = ()
    adjs: tuple[tuple[str, str], ...] = ()
    mod: Union["PP", "SubjectRC", "ObjectRC", None] = None


@dataclass(frozen=True)
class PP:
    prep: str
    frame: str                 # Chinese with {} for the object, before 的: "{}里", "来自{}"
    obj: "Phrase"


@dataclass(frozen=True)
class SubjectRC:
    """`who bought a red book` -> 买了一本红色的书的"""

    rel: str
    verb_en: str
    verb_zh: str
    obj: "Phrase"


@dataclass(frozen=True)
class ObjectRC:
    """`that the teacher bought` -> 老师买的"""

    subj: "Phrase"
    verb_en: str
    verb_zh: str


@dataclass(frozen=True)
class Coord:
    left: NP
    right: NP


Phrase = Union[NP, Coord]


def _adjectives_zh(adjs: tuple[tuple[str, str], ...]) -> str:
    forms = [zh for _, zh in adjs]
    # 著名的年轻老师, not 著名的年轻的老师: the last 的 goes when another adjective precedes.
    if len(forms) >= 2 and forms[-1].endswith("的"):
        forms[-1] = forms[-1][:-1]
    return "".join(forms)


_SILENT_H = {"honest", "hour"}


def _a_or_an(tokens: list[str]) -> list[str]:
    out = list(tokens)
    for i in range(len(out) - 1):
        if out[i] in ("a", "an"):
            nxt = out[i + 1]
            out[i] = "an" if nxt[0] in "aeiou" or nxt in _SILENT_H else "a"
    return out


def en_tokens(p) -> list[str]:
    if isinstance(p, Coord):
        return en_tokens(p.left) + ["and"] + en_tokens(p.right)
    if isinstance(p, PP):
        return p.prep.split() + en_tokens(p.obj)
    if isinstance(p, SubjectRC):
        return [p.rel, p.verb_en] + en_tokens(p.obj)
    if isinstance(p, ObjectRC):
        return ["that"] + en_tokens(p.subj) + [p.verb_en]
    tokens = [w.en for w in p.pre] + [a for a, _ in p.adjs] + [p.head_en]
    if p.mod is not None:
        tokens += en_tokens(p.mod)
    return _a_or_an(tokens)


def en_text(p) -> str:
    return " ".join(en_tokens(p))


def zh_text(p) -> str:
    if isinstance(p, Coord):
        return zh_text(p.left) + "和" + zh_text(p.right)
    if isinstance(p, PP):
        return p.frame.format(zh_text(p.obj)) + "的"
    if isinstance(p, SubjectRC):
        return p.verb_zh + zh_text(p.obj) + "的"
    if isinstance(p, ObjectRC):
        return zh_text(p.subj) + p.verb_zh + "的"
    possessive = "".join(w.zh for w in p.pre if w.possessive)
    counted = "".join(w.zh + (p.noun.mw if w.measure and p.noun else "") for w in p.pre if not w.possessive)
    plural_mark = "们" if p.plural and p.kind == "person" and p.noun and not any(w.quantifies for w in p.pre) else ""
    modifier = zh_text(p.mod) if p.mod is not None else ""
    # The possessive follows the modifier, so that it cannot be read as the modifier's own (窗户旁边的你的架子).
    return modifier + possessive + counted + _adjectives_zh(p.adjs) + p.head_zh + plural_mark


# ----------------------------------------------------------------------------- spans a parser may cut

def _left_variants(p: Phrase) -> list[Phrase]:
    """The phrase with 0, 1, 2, ... of its leading words (possessive, determiner, adjectives) dropped."""
    if isinstance(p, Coord):
        return [Coord(left, p.right) for left in _left_variants(p.left)]
    out = []
    words = [("pre", w) for w in p.pre] + [("adj", a) for a in p.adjs]
    for k in range(len(words) + 1):
        kept = words[k:]
        out.append(dataclasses.replace(
            p, pre=tuple(w for t, w in kept if t == "pre"), adjs=tuple(w for t, w in kept if t == "adj")))
    return out


def _right_variants(p: Phrase) -> list[Phrase]:
    """The phrase cut after its head, or after any noun inside its trailing modifier.

    A parser that attaches a PP to a higher noun than the grammar did cuts such spans
    ("the dog near the house" out of "the dog near the house with a red door").
    """
    if isinstance(p, Coord):
        return [Coord(p.left, right) for right in _right_variants(p.right)]
    if p.mod is None:
        return [p]
    out: list[Phrase] = [dataclasses.replace(p, mod=None)]
    if isinstance(p.mod, (PP, SubjectRC)):
        out += [dataclasses.replace(p, mod=dataclasses.replace(p.mod, obj=o)) for o in _right_variants(p.mod.obj)]
    else:
        out.append(p)
    return out


def _nested(p) -> list[Phrase]:
    if isinstance(p, Coord):
        return [p.left, p.right]
    mod = p.mod
    if isinstance(mod, (PP, SubjectRC)):
        return [mod.obj]
    if isinstance(mod, ObjectRC):
        return [mod.subj]
    return []


def _rightmost_nouns(p: Phrase) -> list[NP]:
    """The noun phrases that end where p ends, below p: "the wall" in "the man behind the wall"."""
    out = []
    while isinstance(p, NP) and isinstance(p.mod, (PP, SubjectRC)) and isinstance(p.mod.obj, NP):
        p = p.mod.obj
        out.append(p)
    return out


def phrase_spans(p: Phrase) -> Iterator[tuple[str, str]]:
    """(English, Chinese) for the phrase, every contiguous cut of it a parser may take, and all phrases inside."""
    for left in _left_variants(p):
        for v in _right_variants(left):
            yield en_text(v), zh_text(v)
    if isinstance(p, Coord):
        # A parser may join the second conjunct to the last noun of the first: "the wall and the market".
        for inner in _rightmost_nouns(p.left):
            for left in _left_variants(inner):
                for right in _right_variants(p.right):
                    v = Coord(left, right)
                    yield en_text(v), zh_text(v)
    for inner in _nested(p):
        yield from phrase_spans(inner)


def _all_phrases(p: Phrase) -> list[Phrase]:
    out = [p]
    for inner in _nested(p):
        out += _all_phrases(inner)
    return out


# ----------------------------------------------------------------------------- sentences

@dataclass
class Sentence:
    en: list[str]
    zh: str
    phrases: list[Phrase] = field(default_factory=list)
    extra: list[tuple[str, str]] = field(default_factory=list)   # time phrases and other small spans

    @property
    def en_text(self) -> str:
        return " ".join(self.en)

    def references(self) -> dict[str, str]:
        refs = {self.en_text: self.zh}
        for p in self.phrases:
            refs.update(phrase_spans(p))
        refs.update(self.extra)
        return refs


def random_span(sentence: Sentence, rng: random.Random) -> tuple[str, str]:
    """One noun phrase of the sentence, mostly whole, sometimes cut the way a parser may cut it."""
    phrases = [q for p in sentence.phrases for q in _all_phrases(p)]
    if not phrases:
        return sentence.en_text, sentence.zh
    p = rng.choice(phrases)
    if rng.random() < 0.2:
        p = rng.choice(_left_variants(p))
    if rng.random() < 0.3:
        p = rng.choice(_right_variants(p))
    return en_text(p), zh_text(p)


def _spec_nouns(spec: str, nouns_by_kind: dict[str, list[Noun]]) -> list[Noun]:
    kind, _, names = spec.partition(":")
    nouns = nouns_by_kind[kind]
    if names:
        wanted = set(names.split(","))
        nouns = [n for n in nouns if n.sg in wanted]
        if not nouns:
            raise ValueError(f"demo lexicon: no noun among {names} of kind {kind}")
    return nouns


@dataclass
class Clause:
    """What a clause's kinds share: its time phrase (fronted or not), tense, negation and adverb."""

    time_phrase: tuple | None
    front_time: bool
    extra: list
    tense: str
    negative: bool
    adverb: tuple | None

    def finish(self, subj, en_vp: list[str], zh_vp: str, phrases: list, front_loc=None) -> Sentence:
        en, zh = [], ""
        if self.front_time:
            en += self.time_phrase[0] + [","]
            zh += self.time_phrase[1] + "，"
        elif front_loc is not None:
            en += front_loc[0] + [","]
            zh += "在" + front_loc[1] + "，"
        en += en_tokens(subj) + en_vp
        zh += zh_text(subj)
        if self.time_phrase and not self.front_time:
            en += self.time_phrase[0]
            zh += self.time_phrase[1]
        return Sentence(en, zh + zh_vp, [subj] + phrases, list(self.extra))


class DemoGrammar:
    """Random sentences of the demo domain, reproducible from a seeded `random.Random`."""

    def __init__(self, rng: random.Random, domain_rate: float = 0.0):
        self.rng = rng
        # The chance that a noun of a kind with domain nouns is one of them (lexicon.DOMAIN_NOUNS); 0: never,
        # and the random stream is that of a grammar without them.
        self.domain_rate = domain_rate
        self.domain = {kind: [Noun(sg, pl, zh, mw, kind) for sg, pl, zh, mw in rows]
                       for kind, rows in lex.DOMAIN_NOUNS.items()}
        self.nouns = {kind: [Noun(sg, pl, zh, mw, kind) for sg, pl, zh, mw in rows] for kind, rows in lex.NOUNS.items()}
        self.adjectives: dict[str, list[tuple[str, int, dict[str, str]]]] = {}
        for kind in self.nouns:
            self.adjectives[kind] = [a for a in lex.ADJECTIVES if kind in a[2]]
        self.locative = {en: (frame, rules) for en, (frame, rules) in lex.PREPOSITIONS.items()}
        self.modifiers: dict[str, list[tuple[str, str, str]]] = {}   # head kind -> (prep, frame, object spec)
        for en, (frame, rules) in lex.PREPOSITIONS.items():
            for head, specs in rules.items():
                self.modifiers.setdefault(head, []).extend((en, frame, s) for s in specs)
        for en, frame, rules in lex.NOUN_ONLY_PREPOSITIONS:
            for head, specs in rules.items():
                self.modifiers.setdefault(head, []).extend((en, frame, s) for s in specs)

    # -- noun phrases

    def pick_noun(self, specs: list[str]) -> Noun:
        spec = self.rng.choice(specs)
        if self.domain_rate and spec in self.domain and self.rng.random() < self.domain_rate:
            return self.rng.choice(self.domain[spec])
        return self.rng.choice(_spec_nouns(spec, self.nouns))

    def noun_phrase(self, specs: list[str], depth: int = 0, *, rc: bool = True, names: bool = True,
                    coordination: bool = False, indefinite: bool = False, modifier: bool = True,
                    adjectives: bool = True, singular: bool = False) -> Phrase:
        r = self.rng
        if coordination and r.random() < 0.07:
            return Coord(self.noun_phrase(specs, depth + 1, rc=False, names=names, indefinite=indefinite),
                         self.noun_phrase(specs, depth + 1, rc=False, names=names, indefinite=indefinite))
        if names and "person" in specs and r.random() < 0.08:
            en, zh = r.choice(lex.NAMES)
            np = NP(en, zh, "person", None)
            if modifier and depth < 2 and r.random() < 0.2:
                np = dataclasses.replace(np, mod=self.noun_modifier(np, depth, rc=False))
            return np
        noun = self.pick_noun(specs)
        plural = not singular and r.random() < (0.15 if noun.kind in lex.PLACES else 0.3)
        pre = self.pre_words(noun, plural, indefinite)
        adjs = self.adjective_list(noun, depth) if adjectives else ()
        np = NP(noun.pl if plural else noun.sg, noun.zh, noun.kind, noun, plural, pre, adjs)
        if modifier:
            mod = self.noun_modifier(np, depth, rc=rc)
            if mod is not None:
                np = dataclasses.replace(np, mod=mod)
        return np

    def pre_words(self, noun: Noun, plural: bool, indefinite: bool) -> tuple[Pre, ...]:
        r = self.rng
        words: list[Pre] = []
        if not indefinite and noun.kind not in lex.PLACES and r.random() < 0.07:
            en, zh = r.choice(lex.POSSESSIVES)
            words.append(Pre(en, zh, measure=False, quantifies=False, possessive=True))
            if plural and r.random() < 0.4:
                en, zh = r.choice(lex.NUMBERS)
                words.append(Pre(en, zh, measure=True, quantifies=True))
            return tuple(words)
        if plural:
            x = r.random()
            if x < 0.3:
                en, zh = r.choice(lex.NUMBERS)
                return (Pre(en, zh, measure=True, quantifies=True),)
            if x < 0.42:
                return ()   # bare plural
        options = [(d, w) for d, w in zip(lex.DETERMINERS, lex.DETERMINER_WEIGHTS)
                   if d[1] == ("pl" if plural else "sg") and not (indefinite and d[0] in ("the", "this", "that", "these", "those"))]
        (en, _, zh, measure), = r.choices([d for d, _ in options], weights=[w for _, w in options])
        return (Pre(en, zh, measure=measure, quantifies=en != "the"),)

    def adjective_list(self, noun: Noun, depth: int) -> tuple[tuple[str, str], ...]:
        r = self.rng
        weights = [0.3, 0.45, 0.25] if depth == 0 else [0.45, 0.42, 0.13]
        n = r.choices([0, 1, 2], weights=weights)[0]
        pool = list(self.adjectives[noun.kind])
        r.shuffle(pool)
        chosen, groups = [], set()
        for en, group, forms in pool:
            if len(chosen) == n:
                break
            if group in groups:
                continue
            chosen.append((group, en, forms.get(noun.sg, forms[noun.kind])))
            groups.add(group)
        chosen.sort(key=lambda c: c[0])
        return tuple((en, zh) for _, en, zh in chosen)

    def noun_modifier(self, np: NP, depth: int, rc: bool):
        r = self.rng
        x = r.random()
        p_pp = (0.55, 0.4, 0.0)[min(depth, 2)]
        if x < p_pp and self.modifiers.get(np.kind):
            prep, frame, spec = r.choice(self.modifiers[np.kind])
            obj = self.noun_phrase([spec], depth + 1, rc=False, names=False)
            return PP(prep, frame, obj)
        if rc and depth == 0 and x < p_pp + 0.1 and np.kind in ("person", "animal", "readable", "object", "building"):
            return self.relative_clause(np, depth)
        return None

    def relative_clause(self, np: NP, depth: int):
        r = self.rng
        subject_verbs = [v for v in lex.TRANSITIVE if np.kind in {s.split(":")[0] for s in v[5]}
                         and self._fits(np, v[5])]
        object_verbs = [v for v in lex.TRANSITIVE if self._fits(np, v[6])]
        if subject_verbs and (not object_verbs or r.random() < 0.55):
            v = r.choice(subject_verbs)
            obj = self.noun_phrase(v[6], depth + 1, rc=False, names=True)
            zh_base, zh_past = self._verb_zh(v, obj)
            return SubjectRC("who" if np.kind == "person" else "that", v[2], zh_past, obj)
        if object_verbs:
            v = r.choice(object_verbs)
            subj = self.noun_phrase(v[5], depth + 1, rc=False, names=True, modifier=False)
            zh_base, _ = self._verb_zh(v, np)
            return ObjectRC(subj, v[2], zh_base)
        return None

    @staticmethod
    def _fits(np: NP, specs: list[str]) -> bool:
        for spec in specs:
            kind, _, names = spec.partition(":")
            if kind == np.kind and (not names or (np.noun is not None and np.noun.sg in names.split(","))):
                return True
        return False

    @staticmethod
    def _verb_zh(v: tuple, obj: Phrase) -> tuple[str, str]:
        kind = (obj.left if isinstance(obj, Coord) else obj).kind
        return v[7].get(kind, (v[3], v[4]))

    # -- clauses

    def _agreement_plural(self, subj: Phrase) -> bool:
        return isinstance(subj, Coord) or subj.plural

    def _verb_forms(self, base: str, s3: str, past: str, zh_base: str, zh_past: str, tense: str,
                    negative: bool, plural: bool) -> tuple[list[str], list[str], str, str]:
        """(English auxiliaries, English verb, Chinese auxiliary, Chinese verb)."""
        if tense == "past":
            return (["did", "not"], [base], "没有", zh_base) if negative else ([], [past], "", zh_past)
        if tense == "present":
            if negative:
                return (["do" if plural else "does", "not"], [base], "不", zh_base)
            return [], [base if plural else s3], "", zh_base
        return (["will", "not"] if negative else ["will"]), [base], ("不会" if negative else "会"), zh_base

    def location(self, head_kind: str, depth: int = 1) -> tuple[list[str], str, Phrase] | None:
        options = [(en, frame, s) for en, (frame, rules) in self.locative.items() for s in rules.get(head_kind, [])]
        if not options:
            return None
        en, frame, spec = self.rng.choice(options)
        obj = self.noun_phrase([spec], depth, rc=False, names=False)
        return [en] + en_tokens(obj), frame.format(zh_text(obj)), obj

    def sentence(self) -> Sentence:
        r = self.rng
        kind = r.choices(["transitive", "intransitive", "ditransitive", "existential", "adjective", "located", "saying"],
                         weights=[46, 16, 8, 6, 7, 6, 6])[0]
        if kind == "saying":
            speaker = self.noun_phrase(["person"], 1, rc=False)
            past = r.random() < 0.7
            verb = r.choice(lex.SAYING)
            inner = self.clause(r.choice(["transitive", "intransitive"]), allow_front=False,
                                tense="past" if past else None)
            if inner is None:
                return self.sentence()
            s3 = verb[1] if not self._agreement_plural(speaker) else {"says": "say", "thinks": "think", "knows": "know"}[verb[1]]
            # "knew that that dog ..." trips a parser: the complementizer goes before a demonstrative.
            that = [] if inner.en[0] in ("that", "this", "these", "those") else ["that"]
            en = en_tokens(speaker) + [verb[0] if past else s3] + that + inner.en
            return Sentence(en + ["."], zh_text(speaker) + verb[2] + inner.zh + "。", [speaker] + inner.phrases, inner.extra)
        s = self.clause(kind, allow_front=True)
        if s is None:
            return self.sentence()
        return Sentence(s.en + ["."], s.zh + "。", s.phrases, s.extra)

    def _time(self, tense: str | None) -> tuple[list[str], str, str] | None:
        r = self.rng
        if r.random() < 0.35:
            choices = [t for t in lex.TIMES if tense is None or t[2] == tense]
            # Present tense is rarer: "paints", "visits", "climb" read as nouns too often for a parser.
            weights = [0.5 if t[2] == "present" else 1.0 for t in choices]
            en, zh, t = r.choices(choices, weights=weights)[0]
            return en.split(), zh, t
        return None

    def clause(self, kind: str, allow_front: bool, tense: str | None = None) -> Sentence | None:
        r = self.rng
        time_phrase = self._time(tense)
        if tense is None:
            tense = time_phrase[2] if time_phrase else r.choices(["past", "present", "future"], weights=[86, 4, 10])[0]
        front_time = allow_front and time_phrase is not None and r.random() < 0.25
        extra = [(" ".join(time_phrase[0]), time_phrase[1])] if time_phrase else []
        negative = r.random() < 0.07
        adverb = None if negative or r.random() > 0.15 else r.choice(lex.ADVERBS)
        c = Clause(time_phrase, front_time, extra, tense, negative, adverb)
        if kind in ("transitive", "ditransitive", "intransitive"):
            return getattr(self, f"_{kind}")(c)
        if tense == "future" or negative:
            return None   # copular clauses stay in the present or past, affirmative
        if kind in ("existential", "adjective", "located"):
            return getattr(self, f"_{kind}")(c)
        raise ValueError(kind)

    def _transitive(self, c: "Clause") -> Sentence:
        r = self.rng
        v = r.choice(lex.TRANSITIVE)
        subj = self.noun_phrase(v[5], 0, coordination=True)
        obj = self.noun_phrase(v[6], 0, coordination=True)
        aux_en, verb_en, aux_zh, verb_zh = self._verb_forms(
            *v[:3], *self._verb_zh(v, obj), c.tense, c.negative, self._agreement_plural(subj))
        if c.adverb:
            aux_en, aux_zh = aux_en + [c.adverb[0]], aux_zh + c.adverb[1]
        front_loc = None
        head_kind = (subj.left if isinstance(subj, Coord) else subj).kind
        if not c.front_time and not isinstance(subj, Coord) and r.random() < 0.12:
            front_loc = self.location(head_kind)
        en_vp = aux_en + verb_en + en_tokens(obj)
        zh_vp = aux_zh + verb_zh + zh_text(obj)
        phrases = [obj] + ([front_loc[2]] if front_loc else [])
        return c.finish(subj, en_vp, zh_vp, phrases, front_loc)

    def _ditransitive(self, c: "Clause") -> Sentence:
        r = self.rng
        base, s3, past, zh_base, zh_past, frame, do_specs = r.choice(lex.DITRANSITIVE)
        subj = self.noun_phrase(["person"], 0, coordination=True)
        # Modifiers on the indirect object run into the direct object for a parser ("the angry waiter a small box").
        io = self.noun_phrase(["person"], 1, rc=False, modifier=False, adjectives=False)
        do = self.noun_phrase(do_specs, 1, rc=False, indefinite=True, singular=True)
        aux_en, verb_en, aux_zh, verb_zh = self._verb_forms(
            base, s3, past, zh_base, zh_past, c.tense, c.negative, self._agreement_plural(subj))
        if c.adverb:
            aux_en, aux_zh = aux_en + [c.adverb[0]], aux_zh + c.adverb[1]
        en_vp = aux_en + verb_en + en_tokens(io) + en_tokens(do)
        if frame == "direct":
            zh_vp = aux_zh + verb_zh + zh_text(io) + zh_text(do)
        else:
            zh_vp = aux_zh + "给" + zh_text(io) + verb_zh + zh_text(do)
        return c.finish(subj, en_vp, zh_vp, [io, do])

    def _intransitive(self, c: "Clause") -> Sentence:
        r = self.rng
        base, s3, past, zh_base, zh_past, subj_specs = r.choice(lex.INTRANSITIVE)
        subj = self.noun_phrase(subj_specs, 0, coordination=True)
        aux_en, verb_en, aux_zh, verb_zh = self._verb_forms(
            base, s3, past, zh_base, zh_past, c.tense, c.negative, self._agreement_plural(subj))
        if c.adverb:
            aux_en, aux_zh = aux_en + [c.adverb[0]], aux_zh + c.adverb[1]
        head_kind = (subj.left if isinstance(subj, Coord) else subj).kind
        loc = self.location(head_kind) if r.random() < 0.65 else None
        en_vp = aux_en + verb_en + (loc[0] if loc else [])
        zh_vp = aux_zh + ("在" + loc[1] if loc else "") + verb_zh
        return c.finish(subj, en_vp, zh_vp, [loc[2]] if loc else [])

    def _existential(self, c: "Clause") -> Sentence | None:
        r = self.rng
        specs = r.choice([["person"], ["animal"], ["readable", "object", "food"], ["vehicle"], ["plant"]])
        thing = self.noun_phrase(specs, 1, rc=False, names=False, indefinite=True, modifier=False)
        loc = self.location((thing.kind), depth=1)
        if loc is None:
            return None
        be = ("were" if thing.plural else "was") if c.tense == "past" else ("are" if thing.plural else "is")
        sent = Sentence(["there", be] + en_tokens(thing) + loc[0], loc[1] + "有" + zh_text(thing),
                        [thing, loc[2]], list(c.extra))
        # "there is a cat under the table": a parser may also read the PP as the noun's modifier.
        prep = loc[0][0]
        sent.extra += phrase_spans(dataclasses.replace(thing, mod=PP(prep, self.locative[prep][0], loc[2])))
        if c.time_phrase:
            return None   # keep existential clauses free of time phrases
        return sent

    def _adjective(self, c: "Clause") -> Sentence:
        r = self.rng
        adj, (_, forms) = r.choice(list(lex.PREDICATIVE.items()))
        kinds = [k for k in forms if k in self.nouns]
        subj = self.noun_phrase([r.choice(kinds)], 0, coordination=False)
        plural = self._agreement_plural(subj)
        be = ("were" if plural else "was") if c.tense == "past" else ("are" if plural else "is")
        return c.finish(subj, [be, adj], forms[subj.kind], [])

    def _located(self, c: "Clause") -> Sentence | None:
        subj = self.noun_phrase(["person", "animal", "readable", "object", "vehicle", "food"], 0,
                                rc=False, coordination=True)
        head_kind = (subj.left if isinstance(subj, Coord) else subj).kind
        loc = self.location(head_kind)
        if loc is None:
            return None
        plural = self._agreement_plural(subj)
        be = ("were" if plural else "was") if c.tense == "past" else ("are" if plural else "is")
        return c.finish(subj, [be] + loc[0], "在" + loc[1], [loc[2]])
