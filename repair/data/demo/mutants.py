"""The demo's word-replacement mutants: for every sentence under test, each noun or adjective replaced by another
of the lexicon that the grammar would put there (a noun of the same kind, number and measure word; an adjective
of the same order group that the noun's kind takes), with the reference the grammar gives the mutant. The groups
of interchangeable words are written for `purity.replace.candidates=lexicon`."""

from __future__ import annotations

import dataclasses
from typing import Iterator

from repair.data.demo import lexicon as lex
from repair.data.demo.grammar import NP, PP, Coord, Noun, ObjectRC, Phrase, Sentence, SubjectRC, en_tokens, zh_text

_ADJ_FORMS = {en: (group, forms) for en, group, forms in lex.ADJECTIVES}


def _nouns() -> list[Noun]:
    return [Noun(sg, pl, zh, mw, kind) for kind, rows in lex.NOUNS.items() for sg, pl, zh, mw in rows]


def _noun_group(noun: Noun) -> list[Noun]:
    """Nouns the grammar could have put in its place with the same Chinese around it."""
    return [n for n in _nouns() if n.kind == noun.kind and n.mw == noun.mw and n.sg != noun.sg]


def _adjective_zh(en: str, noun: Noun | None, kind: str) -> str | None:
    group_forms = _ADJ_FORMS.get(en)
    if group_forms is None:
        return None
    forms = group_forms[1]
    return forms.get(noun.sg, forms.get(kind)) if noun is not None else forms.get(kind)


def lexicon_groups() -> list[dict]:
    """{"tag", "words"} groups: nouns by kind and measure word (singular NN, plural NNS), adjectives by order
    group and the kind of noun they describe (JJ)."""
    groups: dict[tuple, list[str]] = {}
    for n in _nouns():
        groups.setdefault(("NN", n.kind, n.mw), []).append(n.sg)
        groups.setdefault(("NNS", n.kind, n.mw), []).append(n.pl)
    for en, group, forms in lex.ADJECTIVES:
        for kind in forms:
            groups.setdefault(("JJ", group, kind), []).append(en)
    return [{"tag": key[0], "words": sorted(set(words))} for key, words in sorted(groups.items(), key=str)
            if len(set(words)) > 1]


def _with_noun(np: NP, new: Noun) -> NP | None:
    adjs = []
    for en, _ in np.adjs:
        zh = _adjective_zh(en, new, np.kind)
        if zh is None:
            return None
        adjs.append((en, zh))
    return dataclasses.replace(np, head_en=new.pl if np.plural else new.sg, head_zh=new.zh, noun=new, adjs=tuple(adjs))


def _variants(p: Phrase) -> Iterator[Phrase]:
    """p with one noun or one adjective replaced, anywhere inside it."""
    if isinstance(p, Coord):
        yield from (Coord(v, p.right) for v in _variants(p.left))
        yield from (Coord(p.left, v) for v in _variants(p.right))
        return
    if p.noun is not None:
        for new in _noun_group(p.noun):
            v = _with_noun(p, new)
            if v is not None:
                yield v
    for i, (en, _) in enumerate(p.adjs):
        group = _ADJ_FORMS.get(en, (None,))[0]
        others = {a for a, (g, forms) in _ADJ_FORMS.items() if g == group and a != en and p.kind in forms}
        for other in sorted(others - {a for a, _ in p.adjs}):
            zh = _adjective_zh(other, p.noun, p.kind)
            adjs = p.adjs[:i] + ((other, zh),) + p.adjs[i + 1:]
            yield dataclasses.replace(p, adjs=adjs)
    mod = p.mod
    if isinstance(mod, (PP, SubjectRC)):
        for v in _variants(mod.obj):
            yield dataclasses.replace(p, mod=dataclasses.replace(mod, obj=v))
    elif isinstance(mod, ObjectRC):
        for v in _variants(mod.subj):
            yield dataclasses.replace(p, mod=dataclasses.replace(mod, subj=v))


def _replace_once(seq: list, old: list, new: list) -> list | None:
    """seq with its one occurrence of the sublist old replaced by new (None when not exactly once)."""
    n = len(old)
    at = [i for i in range(len(seq) - n + 1) if seq[i:i + n] == old]
    return seq[:at[0]] + new + seq[at[0] + n:] if len(at) == 1 else None


def mutant_references(s: Sentence) -> dict[str, str]:
    """English mutant -> its reference, for every one-word replacement the grammar allows in the sentence's
    phrases (a phrase whose English or Chinese occurs more than once in the sentence is left alone)."""
    out: dict[str, str] = {}
    for p in s.phrases:
        old_en, old_zh = en_tokens(p), zh_text(p)
        if s.zh.count(old_zh) != 1:
            continue
        for v in _variants(p):
            new_en, new_zh = en_tokens(v), zh_text(v)
            if len(new_en) != len(old_en) or sum(a != b for a, b in zip(new_en, old_en)) > 2:
                continue  # one word (and "a" turned "an") changed, nothing else
            en = _replace_once(s.en, old_en, new_en)
            if en is None:
                continue
            text = " ".join(en)
            out.setdefault(text, s.zh.replace(old_zh, new_zh, 1))
    return out
