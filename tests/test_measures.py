"""Efficacy, generality and locality on small hand-made tables, the tests against SciPy's; what fine-tuning
may train on (never a held-out sentence) and what BLEU may score (never a line a fine-tuning source came from)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest, bootstrap

from repair.measures import (bleu_lines, changes, contains_any, correction_terms, exact_generality, locality,
                             reach, sentence_generality, source_key, term_recall)
from repair.errors import UserError
from repair.stats import bootstrap_mean_ci, mcnemar_exact, sign_test


def test_sign_test_and_mcnemar_are_scipys_binomial_test():
    for up, down in [(0, 6), (6, 0), (10, 2), (3, 3), (1, 8), (13, 20)]:
        assert sign_test(up, down) == pytest.approx(binomtest(up, up + down, 0.5).pvalue)
    assert sign_test(0, 0) == 1.0
    r = mcnemar_exact([True] * 7 + [False] * 2 + [True] * 30, [False] * 7 + [True] * 2 + [True] * 30)
    assert (r["resolved"], r["new"]) == (7, 2)
    assert r["p_value"] == pytest.approx(binomtest(7, 9, 0.5).pvalue)


def test_bootstrap_interval_agrees_with_scipys_percentile_bootstrap():
    values = [0.0] * 40 + [5.0, -3.0, 12.5, -1.0, 2.0, 0.5, -7.0, 9.0]
    ours = bootstrap_mean_ci(values, samples=20000, seed=3)
    theirs = bootstrap((np.array(values),), np.mean, n_resamples=20000, method="percentile",
                       random_state=np.random.default_rng(4)).confidence_interval
    assert ours[0] < np.mean(values) < ours[1]
    assert ours == pytest.approx([theirs.low, theirs.high], abs=0.15)
    assert bootstrap_mean_ci([]) is None


def test_a_held_out_sentence_has_issues_when_any_of_its_cases_is_one():
    sentences = ["s1 .", "s2 .", "s3 .", "s4 .", "s5 ."]
    # s1: two cases, both issues before, one after (still has issues); s2: one issue before, none after;
    # s3: none before, one after; s4: no issue; s5: no case at all
    pairs = [{"id": "a", "sentence": "s1 ."}, {"id": "b", "sentence": "s1 ."}, {"id": "c", "sentence": "s2 ."},
             {"id": "d", "sentence": "s3 ."}, {"id": "e", "sentence": "s4 ."}]
    r = sentence_generality(sentences, pairs, {"a", "b", "c"}, {"b", "d"})
    assert (r["sentences"], r["with_issues_before"], r["with_issues_after"]) == (5, 2, 2)
    assert (r["resolved"], r["new"]) == (1, 1)
    assert r["p_value"] == pytest.approx(binomtest(1, 2, 0.5).pvalue)
    # 8 sentences lose their issues, none gains one: sentences, not pairs (3 pairs each), are the units
    sents = [f"t{i} ." for i in range(10)]
    pairs = [{"id": f"{i}-{j}", "sentence": s} for i, s in enumerate(sents) for j in range(3)]
    before = {p["id"] for p in pairs}
    after = {p["id"] for p in pairs if p["sentence"] in sents[8:]}
    r = sentence_generality(sents, pairs, before, after)
    assert (r["with_issues_before"], r["with_issues_after"]) == (10, 2)
    assert r["p_value"] == pytest.approx(binomtest(8, 8, 0.5).pvalue)


def test_exact_matches_of_the_reference_before_and_after():
    refs = {"a": "甲 乙", "b": "丙", "c": "丁", "d": "戊"}
    before = {"a": "甲乙", "b": "X", "c": "丁", "d": "Y", "e": "no reference"}
    after = {"a": "甲乙", "b": "丙", "c": "Z", "d": "戊", "e": "?"}
    r = exact_generality(list(before), refs, before, after)
    assert (r["texts"], r["before"], r["after"], r["lost"], r["gained"]) == (4, 2, 3, 1, 2)
    assert r["p_value"] == pytest.approx(binomtest(1, 3, 0.5).pvalue)
    assert exact_generality(list(before), None, before, after) is None


def test_term_recall_counts_sentences_whose_reference_has_a_corrected_word():
    corrections = [{"source": "three red books", "translation": "三本书", "correction": "三本红色的书"},
                   {"source": "two stone bridges", "translation": "两座桥", "correction": "两座石头桥"}]
    terms = correction_terms(corrections, stop_tokens=("的",))
    assert "红色" in terms and "石头" in terms and "的" not in terms and "书" not in terms
    rows = [
        {"reference": "我有红色的书。", "before": "我有书。", "after": "我有红色的书。"},      # gained
        {"reference": "石头桥很老。", "before": "桥很老。", "after": "石头桥很老。"},          # gained
        {"reference": "红色的石头。", "before": "红色的石头。", "after": "红色的石头。"},      # kept
        {"reference": "红色的石头。", "before": "红色的石头。", "after": "石头。"},            # lost
        {"reference": "他走了。", "before": "他走了。", "after": "他走了。"},                  # no term: not counted
    ]
    r = term_recall(terms, rows)
    assert (r["sentences"], r["before"], r["after"], r["gained"], r["lost"]) == (4, 2, 3, 2, 1)
    assert r["p_value"] == pytest.approx(binomtest(2, 3, 0.5).pvalue)


def test_changes_are_the_word_runs_taken_out_and_put_in():
    assert changes("三本书", "三本红色的书", stop_tokens=("的",)) == {("", "红色")}
    assert changes("两座桥", "两座石头桥") == {("", "石头")}
    assert changes("一只老师", "一位老师") == {("只", "位")}  # the measure word, whatever jieba makes of it
    assert changes("我有书。", "我有书", stop_tokens=("的",)) == set()  # punctuation alone is no change
    assert changes("他的书", "他书", stop_tokens=("的",)) == set()  # nor a stop token alone


def test_reach_counts_held_out_sentences_with_issues_that_show_a_corrected_change():
    corrections = [{"source": "a red book", "translation": "一本书", "correction": "一本红色的书"}]
    pairs = [  # two sentences with issues (one through two cases), one without
        {"id": "a", "sentence": "I have a red pen .", "sides": [{"source": "I have a red pen ."}, {"source": "a red pen"}]},
        {"id": "b", "sentence": "I have a red pen .", "sides": [{"source": "I have a red pen ."}, {"source": "a pen"}]},
        {"id": "c", "sentence": "he has two cats .", "sides": [{"source": "he has two cats ."}, {"source": "two cats"}]},
        {"id": "d", "sentence": "she ran .", "sides": [{"source": "she ran ."}, {"source": "she"}]},
    ]
    translations = {"I have a red pen .": "我有一支笔。", "a red pen": "一支红色的笔", "a pen": "一支笔",
                    "he has two cats .": "他有两只狗。", "two cats": "两只猫", "she ran .": "她跑了。", "she": "她"}
    references = {"I have a red pen .": "我有一支红色的笔。", "a red pen": "一支红色的笔", "a pen": "一支笔",
                  "he has two cats .": "他有两只猫。", "two cats": "两只猫", "she ran .": "她跑了。", "she": "她"}
    r = reach(corrections, pairs, {"a", "b", "c"}, translations, references, stop_tokens=("的",))
    assert r == {"sentences_with_issues": 2, "with_a_corrected_change": 1, "changes": 1}
    assert reach(corrections, pairs, {"a", "b", "c"}, translations, None) is None  # no references: unknown


def test_locality_leaves_out_texts_with_a_corrected_source_and_counts_each_text_once():
    from sacrebleu.metrics import CHRF

    rows = [
        # contains the corrected source (case and spaces aside): not unrelated
        {"kind": "sentence", "source": "I saw  THREE red books .", "reference": "我看见了三本红色的书。",
         "before": "我看见了三本书。", "after": "我看见了三本红色的书。"},
        # "red books" inside "bored books"? no: whole tokens only, so this one is unrelated
        {"kind": "phrase", "source": "the bored bookseller", "reference": "无聊的书商", "before": "无聊的书商",
         "after": "书商"},  # correct -> wrong
        {"kind": "sentence", "source": "a cat .", "reference": "一只猫。", "before": "猫。", "after": "一只猫。"},
        {"kind": "sentence", "source": "a dog .", "reference": "一只狗。", "before": "一只狗。", "after": "一只狗。"},
        {"kind": "sentence", "source": "a dog .", "reference": "一只狗。", "before": "一只狗。", "after": "一只狗。"},
        {"kind": "mutant", "source": "a pig .", "reference": None, "before": "猪。", "after": "一头猪。"},
    ]
    r = locality(rows, ["three red books"], samples=2000)
    assert (r["texts"], r["changed"], r["with_reference"]) == (4, 3, 3)
    assert (r["correct_before"], r["correct_to_wrong"], r["wrong_to_correct"]) == (2, 1, 1)
    assert r["p_value"] == pytest.approx(binomtest(1, 2, 0.5).pvalue)
    assert r["by_kind"]["mutant"] == {"texts": 1, "changed": 1, "correct_before": 0, "correct_to_wrong": 0,
                                      "wrong_to_correct": 0}
    chrf = CHRF()
    deltas = [chrf.sentence_score("书商", ["无聊的书商"]).score - 100.0,
              100.0 - chrf.sentence_score("猫。", ["一只猫。"]).score, 0.0]
    assert r["chrf_delta"] == pytest.approx(sum(deltas) / 3, abs=1e-3)
    low, high = r["chrf_delta_ci"]
    assert min(deltas) - 1e-3 <= low <= r["chrf_delta"] <= high <= max(deltas) + 1e-3
    assert r["changed_share"] == pytest.approx(3 / 4) and r["correct_to_wrong_share"] == pytest.approx(1 / 2)
    assert "taught_words" not in r
    # a scoped edit's taught words: the same counts apart for the texts holding one (either number) and the others
    t = locality(rows, ["three red books"], samples=200, taught=["cats", "bookseller"])
    assert t["taught_words"] == {"texts": 2, "changed": 2, "correct_before": 1, "correct_to_wrong": 1,
                                 "wrong_to_correct": 1}
    assert t["outside"] == {"texts": 2, "changed": 1, "correct_before": 1, "correct_to_wrong": 0,
                            "wrong_to_correct": 0}
    assert {k: t[k] for k in ("texts", "changed")} == {"texts": 4, "changed": 3}


def test_containment_is_on_whole_tokens_case_and_spaces_aside():
    keys = {source_key("Red  Books")}
    assert contains_any("three red books .", keys)
    assert not contains_any("three bored books .", keys)
    assert not contains_any("red bookshelves", keys)


def test_no_held_out_sentence_and_no_bleu_line_is_a_source_of_a_fine_tuning_pair(tmp_path):
    """The loop's own functions: fine-tuning pairs leave out the held-out sentences wherever they come from
    (kept texts, replayed training pairs), and BLEU leaves out every line a fine-tuning source came from."""
    from repair.stages.finetune import finetune_pairs, settings_from_config

    held = ["the old man reads .", "a big dog ran ."]
    test_en = ["the red cat sat .", "a small bird sang .", "the old man reads ."]
    clean = tmp_path / "clean"
    clean.mkdir()
    # training data that repeats a held-out sentence and a BLEU-test line (as a user's corpus may)
    train = [("the old man reads .", "老人在读书。"), ("a small bird sang .", "一只小鸟唱歌了。"),
             ("two fish swim .", "两条鱼在游。")]
    (clean / "train.en").write_text("".join(e + "\n" for e, _ in train), encoding="utf-8")
    (clean / "train.zh").write_text("".join(z + "\n" for _, z in train), encoding="utf-8")
    (tmp_path / "translations.tsv").write_text(
        "the red cat sat .\t红色的猫坐着。\nthe red cat\t红猫\na big dog ran .\t一只大狗跑了。\n", encoding="utf-8")
    corrections = [{"source": "the red cat", "correction": "红色的猫"}]
    ft = {"lr": 1e-4, "patience": 1, "max_epoch": 1, "repeat": 2, "replay": 3, "keep": 10}
    settings = settings_from_config(ft, seed=1, exclude=held)
    pairs = finetune_pairs(settings, corrections, tmp_path, tmp_path, [])
    sources = {s for s, _ in pairs}
    assert not sources & set(held)
    assert {"the red cat", "two fish swim .", "a small bird sang .", "the red cat sat ."} <= sources
    kept, excluded = bleu_lines(test_en, sources)
    assert not {test_en[i] for i in kept} & sources
    assert (kept, excluded) == ([2], 2)
    # without the exclusion the held-out sentence would have been trained on: the check above can fail
    unguarded = finetune_pairs(settings_from_config(ft, seed=1), corrections, tmp_path, tmp_path, [])
    assert "the old man reads ." in {s for s, _ in unguarded}


def test_held_out_sentences_read_the_references_aligned_with_the_input(tmp_path):
    """data=parallel / wmt18: Purity tests X.en; X.zh beside it, line by line, is what its sentences are judged by."""
    from repair.stages import Data

    en, zh = tmp_path / "test.en", tmp_path / "test.zh"
    en.write_text("The cat  sat .\nA dog ran .\n", encoding="utf-8")
    zh.write_text("猫坐着。\n一只狗跑了。\n", encoding="utf-8")
    refs = Data(tmp_path, en, None).sentence_references
    assert refs["The cat sat ."] == "猫坐着。" and refs["A dog ran ."] == "一只狗跑了。"
    assert refs.get("The cat sat") == "猫坐着。" and refs.get("A cat ran .") is None
    # the oracle's table is the same one: a corpus's sentence references judge its sentences
    assert Data(tmp_path, en, None).reference_table["A dog ran ."] == "一只狗跑了。"
    # data.references may name the aligned Chinese file itself
    other = tmp_path / "refs.txt"
    other.write_text("猫坐了。\n狗跑了。\n", encoding="utf-8")
    assert Data(tmp_path, en, other).reference_table["A dog ran ."] == "狗跑了。"
    other.write_text("猫坐了。\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"refs.txt has 1 lines but .*test.en, have 2"):
        Data(tmp_path, en, other).reference_table
    zh.write_text("猫坐着。\n", encoding="utf-8")  # not aligned: named as such, not taken for no references
    with pytest.raises(UserError, match=r"test.zh, the references beside the sentences, has 1 lines but .*test.en, "
                                        r"have 2: the references do not line up .* or move .*test.zh aside"):
        Data(tmp_path, en, None).sentence_references
    zh.unlink()
    assert Data(tmp_path, en, None).sentence_references is None
    assert Data(tmp_path, tmp_path / "input.txt", None).sentence_references is None


def test_reach_by_sentence_lists_the_changed_held_out_sentences_with_what_they_gained():
    from repair.measures import reach_by_sentence

    corrections = [{"source": "a red book", "translation": "一本书", "correction": "一本红色的书"}]
    terms = correction_terms(corrections, stop_tokens=("的",))
    assert terms == ["红色"]
    rows = [
        {"source": "I have red pens .", "reference": "我有红色的笔。", "before": "我有笔。", "after": "我有红色的笔。"},
        {"source": "The sky is red .", "reference": "天是红的。", "before": "天是红的。", "after": "天是红色的。"},
        {"source": "He ran .", "reference": "他跑了。", "before": "他跑。", "after": "他跑了。"},
        {"source": "She sat .", "reference": "她坐下了。", "before": "她坐下了。", "after": "她坐下了。"},  # unchanged
    ]
    r = reach_by_sentence(terms, rows, corrections, taught=("pen",), stop_tokens=("的",))
    assert (r["sentences"], r["changed"], r["gained_a_word"], r["gained_a_right_word"], r["repeat_a_change"]) == \
        (4, 3, 2, 1, 1)
    by = {x["source"]: x for x in r["changed_sentences"]}
    assert by["I have red pens ."]["gained"] == ["红色"] and by["I have red pens ."]["right"] == ["红色"]
    assert by["I have red pens ."]["changes"] == [["", "红色"]] and by["I have red pens ."]["taught_words"] == ["pen"]
    assert by["The sky is red ."]["right"] == [] and by["The sky is red ."]["taught_words"] == []
    assert by["He ran ."]["gained"] == [] and "She sat ." not in by
    from repair.report import reach_markdown

    md = "\n".join(reach_markdown(r))
    assert "3 of the 4 held-out sentences" in md and "2 gained a word" in md
    assert md.index("I have red pens .") < md.index("The sky is red .")  # the ones gaining a right word first
    assert "∅ → 红色" in md and reach_markdown(None) == []
