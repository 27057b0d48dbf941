"""The bundled demo domain: the grammar's translations, the build's files, and reference coverage of spaCy's NPs."""

from __future__ import annotations

import json
import random
import re

import pytest

from repair.data.demo import (
    NP, PP, Coord, DemoGrammar, Noun, ObjectRC, Pre, SubjectRC, build_demo, en_text, generate, load_references,
    normalize_english, span_coverage, zh_text,
)
from repair.errors import UserError

SMALL = dict(n_train=300, n_fragments=100, n_valid=20, n_test=20, n_purity=60)


def noun(sg, pl, zh, mw, kind):
    return Noun(sg, pl, zh, mw, kind)


TEACHER = noun("teacher", "teachers", "老师", "位", "person")
BOOK = noun("book", "books", "书", "本", "readable")
BRIDGE = noun("bridge", "bridges", "桥", "座", "structure")
TABLE = noun("table", "tables", "桌子", "张", "furniture")
CAT = noun("cat", "cats", "猫", "只", "animal")
LIBRARY = noun("library", "libraries", "图书馆", "座", "building")
A = Pre("a", "一", measure=True, quantifies=True)
THE = Pre("the", "", measure=False, quantifies=False)
THREE = Pre("three", "三", measure=True, quantifies=True)
TWO = Pre("two", "两", measure=True, quantifies=True)
THIS = Pre("this", "这", measure=True, quantifies=True)
MY = Pre("my", "我的", measure=False, quantifies=False, possessive=True)


def np(n, pre=(), adjs=(), plural=False, mod=None):
    return NP(n.pl if plural else n.sg, n.zh, n.kind, n, plural, tuple(pre), tuple(adjs), mod)


@pytest.fixture(scope="module")
def small_build(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("demo")
    return data_dir, build_demo(data_dir, seed=3, **SMALL)


# ----------------------------------------------------------------------------- hand-picked translations

@pytest.mark.parametrize("phrase, en, zh", [
    (np(TEACHER, [A]), "a teacher", "一位老师"),
    (np(BOOK, [THREE], plural=True), "three books", "三本书"),
    (np(BRIDGE, [TWO], plural=True), "two bridges", "两座桥"),
    (np(CAT, [THIS]), "this cat", "这只猫"),
    (np(TEACHER, [THE], plural=True), "the teachers", "老师们"),
    (np(TEACHER, [TWO], plural=True), "two teachers", "两位老师"),
    (np(TEACHER, [MY, TWO], [("old", "年老的")], plural=True), "my two old teachers", "我的两位年老的老师"),
    (np(TEACHER, [A], [("old", "年老的")]), "an old teacher", "一位年老的老师"),
    (np(TEACHER, [THE], [("famous", "著名的"), ("young", "年轻的")]), "the famous young teacher", "著名的年轻老师"),
])
def test_measure_words_determiners_and_adjectives(phrase, en, zh):
    assert en_text(phrase) == en
    assert zh_text(phrase) == zh


def test_modifiers_move_before_the_noun_in_chinese():
    cat = np(CAT, [THE], mod=PP("under", "{}下面", np(TABLE, [A], mod=PP("in", "{}里", np(LIBRARY, [THE])))))
    assert en_text(cat) == "the cat under a table in the library"
    assert zh_text(cat) == "图书馆里的一张桌子下面的猫"
    reader = np(TEACHER, [THE], mod=SubjectRC("who", "read", "读了", np(BOOK, [THREE], plural=True)))
    assert (en_text(reader), zh_text(reader)) == ("the teacher who read three books", "读了三本书的老师")
    read = np(BOOK, [THE], mod=ObjectRC(np(TEACHER, [THE]), "read", "读"))
    assert (en_text(read), zh_text(read)) == ("the book that the teacher read", "老师读的书")
    both = Coord(np(TEACHER, [THE]), np(CAT, [A]))
    assert (en_text(both), zh_text(both)) == ("the teacher and a cat", "老师和一只猫")


def test_measure_words_agree_in_generated_references(small_build):
    data_dir, _ = small_build
    refs = load_references(data_dir / "references.jsonl")
    from repair.data.demo import lexicon as lex

    nouns = {n[1]: n for rows in lex.NOUNS.values() for n in rows}   # plural -> entry
    numbers = dict(lex.NUMBERS)
    checked = 0
    for en, zh in refs.items():
        words = en.split()
        if len(words) == 2 and words[0] in numbers and words[1] in nouns:
            _, _, noun_zh, mw = nouns[words[1]]
            assert zh == numbers[words[0]] + mw + noun_zh, (en, zh)
            checked += 1
    singular = {n[0]: n for rows in lex.NOUNS.values() for n in rows}
    for en, zh in refs.items():
        words = en.split()
        if len(words) == 2 and words[0] in ("a", "an", "this", "that") and words[1] in singular:
            _, _, noun_zh, mw = singular[words[1]]
            assert zh == {"a": "一", "an": "一", "this": "这", "that": "那"}[words[0]] + mw + noun_zh, (en, zh)
            checked += 1
    assert checked >= 10


# ----------------------------------------------------------------------------- the build

def test_generation_is_deterministic_for_a_seed():
    a = generate(5, **SMALL)
    b = generate(5, **SMALL)
    c = generate(6, **SMALL)
    assert a == b
    assert a["purity"] != c["purity"]


def test_build_is_the_same_in_another_process(tmp_path):
    """No set or hash order leaks into the corpus: another interpreter with another hash seed writes the same files."""
    import os
    import subprocess
    import sys

    build_demo(tmp_path / "here", seed=4, **SMALL)
    code = ("import sys; from repair.data.demo import build_demo; "
            f"build_demo(sys.argv[1], seed=4, **{SMALL!r})")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "there")], check=True,
                   env={**os.environ, "PYTHONHASHSEED": "12345"})
    for name in ("raw/train.en", "raw/train.zh", "purity.en", "references.jsonl"):
        assert (tmp_path / "here" / name).read_bytes() == (tmp_path / "there" / name).read_bytes(), name


def test_build_writes_the_layout_and_every_purity_sentence_has_a_reference(small_build):
    data_dir, record = small_build
    for split in ("train", "valid", "test"):
        en = (data_dir / "raw" / f"{split}.en").read_text(encoding="utf-8").splitlines()
        zh = (data_dir / "raw" / f"{split}.zh").read_text(encoding="utf-8").splitlines()
        assert len(en) == len(zh) == record["counts"][split]
    assert record["counts"]["train"] == SMALL["n_train"] + SMALL["n_fragments"]
    purity = (data_dir / "purity.en").read_text(encoding="utf-8").splitlines()
    assert len(purity) == SMALL["n_purity"]
    refs = load_references(data_dir / "references.jsonl")
    for sentence in purity:
        assert sentence.endswith(" .")
        assert refs[sentence].endswith("。")
    held_out = set((data_dir / "raw" / "train.en").read_text(encoding="utf-8").splitlines())
    held_out |= set((data_dir / "raw" / "test.en").read_text(encoding="utf-8").splitlines())
    held_out |= set((data_dir / "raw" / "valid.en").read_text(encoding="utf-8").splitlines())
    assert not set(purity) & held_out
    assert json.loads((data_dir / "build.json").read_text())["params"]["seed"] == 3


def test_chinese_has_no_spaces_or_latin_letters_and_english_is_spaced(small_build):
    data_dir, _ = small_build
    zh_lines = (data_dir / "raw" / "train.zh").read_text(encoding="utf-8").splitlines()
    zh_lines += [json.loads(l)["zh"] for l in (data_dir / "references.jsonl").read_text(encoding="utf-8").splitlines()]
    for zh in zh_lines:
        assert zh and " " not in zh and not re.search(r"[A-Za-z0-9.,]", zh), zh
    for en in (data_dir / "raw" / "train.en").read_text(encoding="utf-8").splitlines():
        assert en == " ".join(en.split()) and "'" not in en
        assert not re.search(r"\w[.,]", en), en   # punctuation is its own token


def test_references_cover_the_sentence_and_its_noun_phrases():
    grammar = DemoGrammar(random.Random(11))
    for _ in range(200):
        s = grammar.sentence()
        refs = s.references()
        assert refs[s.en_text] == s.zh
        for p in s.phrases:
            assert refs[en_text(p)] == zh_text(p)
            # the base noun phrase (up to the head) a parser's noun chunk gives
            head = p.left if isinstance(p, Coord) else p
            base = NP(head.head_en, head.head_zh, head.kind, head.noun, head.plural, head.pre, head.adjs)
            assert refs[en_text(base)] == zh_text(base)


def test_build_is_idempotent_and_rebuilds_when_parameters_change(tmp_path):
    first = build_demo(tmp_path, seed=2, **SMALL)
    mtime = (tmp_path / "raw" / "train.en").stat().st_mtime_ns
    assert build_demo(tmp_path, seed=2, **SMALL) == first
    assert (tmp_path / "raw" / "train.en").stat().st_mtime_ns == mtime
    third = build_demo(tmp_path, seed=2, **{**SMALL, "n_purity": 30})
    assert third["counts"]["purity"] == 30
    assert len((tmp_path / "purity.en").read_text(encoding="utf-8").splitlines()) == 30


def test_more_purity_sentences_leave_the_corpus_as_it_was():
    """A larger Purity input (its held-out share with it) must not change what the base model trains on."""
    from repair.data.demo.build import WITH_CORPUS

    base = generate(3, **{**SMALL, "n_purity": WITH_CORPUS})
    more = generate(3, **{**SMALL, "n_purity": WITH_CORPUS + 40})
    for split in ("train", "valid", "test"):
        assert more[split] == base[split]
    assert more["purity"][:WITH_CORPUS] == base["purity"] and len(more["purity"]) == WITH_CORPUS + 40
    corpus = {en for split in ("train", "valid", "test") for en, _ in more[split]}
    assert len(set(more["purity"])) == len(more["purity"]) and not set(more["purity"]) & corpus
    assert all(s in more["references"] for s in more["purity"])


def test_domain_nouns_are_rare_in_the_corpus_and_common_in_the_purity_input(tmp_path):
    """build_demo(domain=share): a field's words the model seldom saw, in many of the sentences Purity tests;
    off (0), the build is the one without them."""
    import re

    from repair.data.demo.lexicon import DOMAIN_NOUNS

    nouns = [w for rows in DOMAIN_NOUNS.values() for sg, pl, _, _ in rows for w in (sg, pl)]
    has = re.compile(r"\b(" + "|".join(nouns) + r")\b")
    sizes = {**SMALL, "n_train": 3000, "n_purity": 100}
    built = generate(5, **sizes, domain=0.5)
    train = sum(bool(has.search(en)) for en, _ in built["train"]) / len(built["train"])
    purity = sum(bool(has.search(en)) for en in built["purity"]) / len(built["purity"])
    assert train < 0.02 and purity > 0.3
    assert all(s in built["references"] for s in built["purity"])
    assert not any(has.search(en) for en in generate(5, **sizes)["purity"])
    plain = build_demo(tmp_path / "plain", **SMALL)
    assert "domain" not in plain["params"] and build_demo(tmp_path / "d", **SMALL, domain=0.5)["params"]["domain"] == 0.5
    with pytest.raises(UserError, match="domain"):
        build_demo(tmp_path / "bad", **SMALL, domain=2)


def test_bad_sizes_are_a_user_error(tmp_path):
    with pytest.raises(UserError, match="n_train"):
        build_demo(tmp_path, **{**SMALL, "n_train": -1})


def test_load_references_normalizes_and_names_bad_lines(tmp_path):
    path = tmp_path / "references.jsonl"
    path.write_text('{"en": "the old  teacher .", "zh": "年老的老师"}\n', encoding="utf-8")
    refs = load_references(path)
    assert refs["the old teacher"] == "年老的老师"
    assert refs.get("the old teacher .") == "年老的老师"
    assert "the  old teacher" in refs and "the young teacher" not in refs
    assert normalize_english(" , the teacher 's dog . ") == "the teacher's dog"
    path.write_text('{"en": "a cat", "zh": "一只猫"}\n{"en": "a cat", "zh": "猫"}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"references.jsonl:2"):
        load_references(path)
    path.write_text('{"en": "a cat"}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"references.jsonl:1"):
        load_references(path)


# ----------------------------------------------------------------------------- spaCy's spans

def test_references_cover_the_spans_spacy_cuts(tmp_path):
    """What Purity translates (RTIs and their NP containers from the spaCy parser) has a reference."""
    pytest.importorskip("spacy")
    build_demo(tmp_path, seed=1, **{**SMALL, "n_purity": 150})
    sentences = (tmp_path / "purity.en").read_text(encoding="utf-8").splitlines()
    coverage = span_coverage(sentences, load_references(tmp_path / "references.jsonl"), data_dir=tmp_path)
    assert coverage["sentences_with_reference"] == len(sentences)
    # the replacement relation's mutants (its lexicon, the raw training English here): the oracle can judge them
    assert coverage["mutants"] >= 240  # 266 with the natural-candidate filters (governor phrase, LM), 300+ before them
    assert coverage["mutants_with_reference"] >= 0.98 * coverage["mutants"], coverage["mutants_missing"]
    assert coverage["texts"] >= 200   # rich NPs: well over one RTI per sentence
    assert coverage["coverage"] >= 0.95, coverage["missing"]
