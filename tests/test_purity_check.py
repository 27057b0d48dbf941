"""Bag-of-words distance between an RTI's translation and its container's, in both units."""

import pytest

from repair.purity import bow_distance, missing_tokens
from repair.purity.check import DEFAULT_STOP_TOKENS, has_latin

# The example of the Purity paper's detection step.
RTI_ZH = "家庭收入最高的1％的儿童"
CONTAINER_ZH = "分析发现，收入最高的五分之一家庭中，收入最高的五分之一家庭中的孩子比进入父母的孩子高77倍。"
MARKET_SENTENCE = "老渔夫把三条鲜鱼卖给了港口附近繁忙的市场。"


def test_paper_example_has_distance_four_by_characters():
    assert bow_distance(RTI_ZH, CONTAINER_ZH) == 4
    assert bow_distance(RTI_ZH, CONTAINER_ZH, unit="char") == 4
    assert missing_tokens(RTI_ZH, CONTAINER_ZH) == ["1", "％", "儿", "童"]


def test_word_unit_segments_with_jieba():
    # 集市 against 市场: one missing word, where characters also count one (集).
    assert missing_tokens("港口附近繁忙的集市", MARKET_SENTENCE, unit="word") == ["集市"]
    assert missing_tokens("港口附近繁忙的集市", MARKET_SENTENCE, unit="char") == ["集"]
    # Segmentation sees 家庭收入 as one word that the container never uses.
    assert missing_tokens(RTI_ZH, CONTAINER_ZH, unit="word") == ["家庭收入", "1", "％", "儿童"]
    assert bow_distance("美国总统", "美国的总统", unit="word") == 0


def test_counts_have_multiplicity():
    assert bow_distance("好好好", "好") == 2
    assert missing_tokens("好好好", "好") == ["好", "好"]
    assert bow_distance("好好", "好好好") == 0


def test_stop_tokens_are_removed_from_the_rti_only():
    assert bow_distance("“的了，·, '\"”", "") == 0
    assert bow_distance("我的书", "我书") == 0
    assert bow_distance("我的书", "我书", stop_tokens=()) == 1
    assert bow_distance("书书", "书", stop_tokens=("书",)) == 0
    assert set(DEFAULT_STOP_TOKENS) == {"“", "”", "，", "·", ",", "的", "了", "'", '"', " "}


def test_unit_must_be_known():
    with pytest.raises(ValueError, match="unit"):
        bow_distance("书", "书", unit="morpheme")


def test_latin_letters_mark_untranslated_text():
    assert has_latin("他用iPhone拍照")
    assert not has_latin("美国有线电视新闻网报道")
    assert not has_latin("CNN报道，3％")  # only lowercase letters: kept acronyms are translations too
