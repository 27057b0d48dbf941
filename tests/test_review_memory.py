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
