"""Review memory (repair.review.memory): which words a reviewer's corrections taught, on hand-made corrections."""

from __future__ import annotations

import pytest

from repair.errors import UserError
from repair.review.memory import ReviewMemory, measure_word_at
from repair.stages.review import memory_options

STOP = ["的", "了", "，", "。"]


def test_a_word_keeps_the_terms_that_every_correction_of_a_source_with_it_holds():
    m = ReviewMemory(STOP, rare=0)
    m.learn("a hungry old sailor", "一名饥饿的年老护士", "一名饥饿的年老水手")
    # one correction teaches its term to each of its words
    assert m.terms("the hungry cat", "饥饿的猫") == {"hungry": ["水手"]}
    assert m.terms("two sailors", "两个护士") == {"sailor": ["水手"]}  # a final s aside
    # a correction of a source with "hungry" and no 水手: the term was not the adjective's
    m.learn("a hungry cat", "一只饥饿的狗", "一只饥饿的猫")
    assert m.terms("the hungry cat", "饥饿的狗") == {"cat": ["猫"]}
    assert m.terms("the old sailor and the hungry cat", "年老的护士和饥饿的狗") == {
        "cat": ["猫"], "old": ["水手"], "sailor": ["水手"]}  # nothing has told "old" apart yet
    # a term the translation already holds is not asked for
    assert m.terms("the angry sailor", "生气的水手") == {}
    # a correction that holds a term without the word takes the term from the word
    m.learn("the angry teacher", "生气的老师", "生气的水手老师")
    assert m.terms("two sailors", "两个护士") == {}


def test_only_words_the_model_seldom_saw_are_learnt():
    seen = {"hungry": 500, "old": 300, "sailor": 3}
    m = ReviewMemory(STOP, seen=seen, rare=100)
    m.learn("a hungry old sailor", "一名饥饿的年老护士", "一名饥饿的年老水手")
    assert m.terms("the hungry cat", "饥饿的猫") == {}
    assert m.terms("the sailor", "护士") == {"sailor": ["水手"]}
    assert ReviewMemory(STOP, seen=seen, rare=0).words("a sailor") == frozenset({"sailor"})


def test_a_correction_that_puts_nothing_in_teaches_nothing_and_a_source_counts_once():
    m = ReviewMemory(STOP, rare=0)
    m.learn("the sailor", "水手们", "水手")  # only took characters out
    assert m.candidates == {}
    m.learn("a sailor", "一个护士", "一名水手")
    m.learn("a sailor", "一个护士", "一个水兵")  # the same source again: the first correction stands
    assert len(m.learnt) == 2 and m.terms("the sailor", "护士") == {"sailor": ["水手"]}  # 一名: not in the first


def test_the_measure_word_the_corrections_agree_on_is_put_before_a_term():
    assert measure_word_at("三名饥饿的水手", 5) == 1
    assert measure_word_at("那些沙发旁边的一名饥饿的年老水手", 14) == 8  # one 的 between: the noun's own
    assert measure_word_at("一张床下面的厚重的黑色小说", 11) is None  # two: 张 is the bed's
    assert measure_word_at("水手，三名饥饿的水手", 0) is None and measure_word_at("他看见水手", 3) is None
    m = ReviewMemory(STOP, rare=0)
    m.learn("three hungry sailors", "三个饥饿的艺术家", "三名饥饿的水手")
    assert m.measure_word("水手") is None  # one correction is not yet an agreement
    assert m.with_measure_words("九个快乐的水手", ["水手"]) == "九个快乐的水手"
    m.learn("a hungry old sailor", "一位饥饿的年老护士", "一名饥饿的年老水手")
    assert m.measure_word("水手") == "名"
    assert m.with_measure_words("九个快乐的水手和一只猫", ["水手"]) == "九名快乐的水手和一只猫"
    assert m.with_measure_words("快乐的水手", ["水手"]) == "快乐的水手"  # no measure word to change
    m.learn("two sailors", "两个护士", "两位水手")
    m.learn("the sailor's two cats", "水手的两只狗", "水手的两只猫")  # 只 is after the term: not its measure word
    assert m.measure_word("水手") == "名"  # two of three
    m.learn("five sailors", "五个护士", "五位水手")
    assert m.measure_word("水手") is None  # two and two: no agreement


@pytest.mark.parametrize("block, message", [
    ({"rare": -1}, "review.memory.rare"),
    ({"beam": 0}, "review.memory.beam"),
    ({"enabled": "yes"}, "review.memory.enabled"),
    ({"size": 3}, "no key 'size'"),
    ("on", "review.memory must be"),
])
def test_bad_memory_settings_are_one_clear_error(block, message):
    with pytest.raises(UserError, match=message):
        memory_options(block)


def test_memory_settings_take_their_defaults():
    assert memory_options(None)["enabled"] is True
    assert memory_options(False) == {**memory_options(None), "enabled": False}
    assert memory_options({"slack": 0})["slack"] == 0


def test_the_memory_is_built_for_the_oracle_and_the_page_and_not_for_a_sheet(tmp_path):
    from helpers import make_issue
    from repair.review.sheet import ReviewPending
    from repair.stages import review

    issues = [make_issue("the old sailor", "年老的护士", "the sailor", "护士", ["水手"])]
    asked = []

    def factory(**options):
        asked.append(options)
        return None  # as for a translator that cannot search: no memory

    with pytest.raises(ReviewPending):
        review.run(tmp_path / "file", issues, {"name": "file"}, None, "cmd", factory)
    assert asked == []
    references = {"the old sailor": "年老的水手", "the sailor": "水手"}
    corrections, _ = review.run(tmp_path / "oracle", issues, {"name": "oracle", "memory": {"slack": 3}}, references,
                                "cmd", factory)
    assert asked == [{**memory_options(None), "slack": 3}] and len(corrections) == 2
    review.run(tmp_path / "off", issues, {"name": "oracle", "memory": False}, references, "cmd", factory)
    assert len(asked) == 1


def test_the_memory_word_vectors_are_cached_by_their_corpus_and_read_back(tmp_path):
    """The vectors of the training English and the texts under review are trained once and cached under a hash of
    both and the settings: the same corpus reads them back (not trained: the file is not written again) with
    the same neighbours; another text under review, or other settings, train and cache vectors of their own."""
    from collections import Counter

    import numpy as np

    from helpers import synthetic_issues
    from repair.review.memory import Substitutes

    corpus = [i["sides"][0]["source"] for i in synthetic_issues(300)]
    seen = Counter(w for line in corpus for w in line.split())
    under_review = ["the old sailor saw the happy pharmacist near the harbour", "the shy poet met the pilot"]

    def made(texts, **settings):
        subs = Substitutes(lambda: corpus, seen, rare=1, k=4, cache_dir=tmp_path / "cache", **settings)
        subs.know(texts)
        return subs, subs.neighbours("pharmacist", {"the"})

    first, near = made(under_review)
    (path,) = (tmp_path / "cache").iterdir()
    written = path.stat().st_mtime_ns
    assert first.built == "trained" and len(near) >= 4
    second, again = made(under_review)
    assert second.built == "cached" and again == near and path.stat().st_mtime_ns == written
    assert np.array_equal(first._model().vectors, second._model().vectors)
    other, _ = made([*under_review, "the famous writer helped a tired nurse"])
    assert other.built == "trained" and len(list((tmp_path / "cache").iterdir())) == 2
    fewer_epochs, _ = made(under_review, epochs=5)
    assert fewer_epochs.built == "trained" and len(list((tmp_path / "cache").iterdir())) == 3
    assert path.stat().st_mtime_ns == written


def test_a_cached_model_that_cannot_be_read_is_made_again(tmp_path):
    """A cache file cut short (or written by the old code with its arrays beside it under another name) is made
    again and replaced, not a failure of every later run."""
    from gensim.models import KeyedVectors

    from repair.purity.relations.natural import cached_model

    path = tmp_path / "k.kv"
    path.write_bytes(b"\x80\x04 cut short")
    trained = []

    def train():
        kv = KeyedVectors(3)
        kv.add_vectors(["a", "b"], [[1, 0, 0], [0, 1, 0]])
        trained.append(kv)
        return kv

    kv = cached_model(path, train, KeyedVectors.load)
    assert len(trained) == 1 and kv.key_to_index == {"a": 0, "b": 1}
    again = cached_model(path, train, KeyedVectors.load)
    assert len(trained) == 1 and again.key_to_index == {"a": 0, "b": 1} and list(tmp_path.iterdir()) == [path]


def test_a_large_cached_model_is_one_file_under_its_own_name(tmp_path):
    """gensim saves an array of 10 Mi values or more beside the model, named after the file it saves to (the
    temporary one); the cache keeps it inside, so the renamed file is the whole model (vectors of 100 values for
    105k words and more: the replacement relation's vectors could not be read back before)."""
    import numpy as np
    from gensim.models import KeyedVectors

    from repair.purity.relations.natural import cached_model

    def train():
        kv = KeyedVectors(11_000_000)
        kv.add_vectors(["a"], np.full((1, 11_000_000), 0.5, dtype=np.float32))
        return kv

    path = tmp_path / "big.kv"
    cached_model(path, train, KeyedVectors.load)
    assert list(tmp_path.iterdir()) == [path]
    back = cached_model(path, lambda: None, KeyedVectors.load)
    assert back.vectors.shape == (1, 11_000_000) and float(back.vectors[0, -1]) == 0.5
