"""Oracle review on hand-made issues with references."""

import json

import pytest

from repair.review.oracle import guess_kind, oracle_review
from helpers import make_issue


def issue(container, ct, rti, rt):
    return {**make_issue(container, ct, rti, rt), "distance": 1}


REFS = {
    "chummy bilateral talks with Mr. Trump": "与特朗普先生的亲切的双边会谈",
    "chummy bilateral talks": "亲切的双边会谈",
    "Mr. Trump": "特朗普先生",
    "the clever boy's dog": "聪明的男孩的狗",
    "the clever boy": "聪明的男孩",
}
UNDER = issue("chummy bilateral talks with Mr. Trump", "与特朗普先生的双边会谈", "chummy bilateral talks", "亲切的 双边会谈")
SAME_CONTAINER = issue("chummy bilateral talks with Mr. Trump", "与特朗普先生的双边会谈", "Mr. Trump", "特朗普先生")
MODIFICATION = issue("the clever boy's dog", "男孩的聪明的狗", "the clever boy", "聪明的男孩")
NO_REFERENCE = issue("a long letter from home", "一封家书", "a long letter", "一封长信")


@pytest.mark.parametrize("translation, reference, kind", [
    ("双边会谈", "亲切的双边会谈", "under-translation"),
    ("亲切的友好的双边会谈", "亲切的双边会谈", "over-translation"),
    ("男孩的聪明的狗", "聪明的男孩的狗", "incorrect modification"),
    ("冷淡的双边会谈", "亲切的双边会谈", "word/phrase mistranslation"),
])
def test_guess_kind(translation, reference, kind):
    assert guess_kind(translation, reference) == kind


def test_oracle_judges_corrects_and_leaves_unknown_sources_unjudged(tmp_path):
    stats = oracle_review([UNDER, SAME_CONTAINER, MODIFICATION, NO_REFERENCE], REFS, tmp_path)
    assert stats["judged"] == 3 and stats["with_error"] == 3 and stats["total"] == 4
    assert stats["not_judged"] == 1 and stats["not_judged_ids"] == [NO_REFERENCE["id"]]
    assert stats["sides_not_judged"] == 2
    judgments = {j["issue"]: j for j in map(json.loads, (tmp_path / "judgments.jsonl").read_text().splitlines())}
    # the RTI "亲切的 双边会谈" equals its reference once whitespace is stripped
    assert judgments[UNDER["id"]]["wrong"] == ["container"]
    assert judgments[SAME_CONTAINER["id"]]["wrong"] == ["container"]
    assert judgments[MODIFICATION["id"]]["wrong"] == ["container"]
    assert NO_REFERENCE["id"] not in judgments
    corrections = [json.loads(s) for s in (tmp_path / "corrections.jsonl").read_text().splitlines()]
    by_source = {c["source"]: c for c in corrections}
    assert len(corrections) == 2 == stats["corrections"]
    talks = by_source["chummy bilateral talks with Mr. Trump"]
    assert talks["issues"] == [UNDER["id"], SAME_CONTAINER["id"]]
    assert talks["correction"] == "与特朗普先生的亲切的双边会谈" and talks["kind"] == "under-translation"
    assert by_source["the clever boy's dog"]["kind"] == "incorrect modification"


def test_sentence_references_alone_judge_what_they_can_and_never_call_an_unjudged_side_right(tmp_path):
    """A real corpus: references for sentences, none for the phrases Purity cuts from them."""
    refs = {"Tom bought a red car.": "汤姆买了一辆红色的车。", "Mary is reading a book.": "玛丽在看书。",
            "Ken drank the milk.": "肯喝了牛奶。"}
    wrong_sentence = issue("Tom bought a red car.", "汤姆买了一辆车。", "a red car", "一辆红色的车")
    right_sentence = issue("Mary is reading a book.", "玛丽在看书。", "a book", "一本书")
    right_too = issue("Ken drank the milk.", "肯喝了牛奶。", "the milk", "牛奶")
    phrases_only = issue("a red car in the garage", "车库里的一辆红车", "a red car", "一辆红色的车")
    stats = oracle_review([wrong_sentence, right_sentence, right_too, phrases_only], refs, tmp_path)
    # judged: only the issue with a wrong sentence; the others hold a side nobody could judge
    assert (stats["judged"], stats["with_error"], stats["precision"]) == (1, 1, 1.0)
    assert stats["not_judged"] == 3 and set(stats["not_judged_ids"]) == {right_sentence["id"], right_too["id"],
                                                                           phrases_only["id"]}
    assert stats["sides_not_judged"] == 5
    [correction] = [json.loads(s) for s in (tmp_path / "corrections.jsonl").read_text().splitlines()]
    assert (correction["source"], correction["correction"]) == ("Tom bought a red car.", "汤姆买了一辆红色的车。")


def test_false_positive_and_rerun_adds_nothing(tmp_path):
    fine = issue("the clever boy's dog", "聪明的男孩的狗", "the clever boy", "聪明的男孩")
    stats = oracle_review([fine], REFS, tmp_path)
    assert stats["judged"] == 1 and stats["with_error"] == 0 and stats["precision"] == 0.0
    oracle_review([fine], REFS, tmp_path)
    assert len((tmp_path / "judgments.jsonl").read_text().splitlines()) == 1
    assert (tmp_path / "corrections.jsonl").read_text() == ""


def test_suggestions_measured_against_the_references_and_recorded_with_the_corrections(tmp_path):
    from repair.review.oracle import suggestion_figures
    from repair.stats import edit_distance

    refs = {"the red cat sat": "红猫坐了", "the red cat": "红猫", "the dog ran": "狗跑了", "the dog": "狗",
            "the big dog ran": "大狗跑了", "the big dog": "大狗"}

    def with_suggestions(issue, *suggestions):
        return {**issue, "suggestions": [{"role": r, "text": t, "origin": "test", "score": -0.5} for r, t in suggestions]}

    issues = [
        # the container wrong, its suggestion the reference
        with_suggestions(make_issue("the red cat sat", "猫坐了", "the red cat", "红猫", ["红"]), ("container", "红猫坐了")),
        # the RTI wrong, its suggestion one character off; the container right
        with_suggestions(make_issue("the dog ran", "狗跑了", "the dog", "大狗", ["大"]), ("rti", "小狗"), ("container", "大狗跑了")),
        # both wrong, no suggestion
        make_issue("the big dog ran", "狗跑", "the big dog", "狗", ["大"]),
        # the same container again: the earlier correction pre-fills it, a suggestion is not needed
        with_suggestions(make_issue("the red cat sat", "猫坐了", "the cat", "猫"), ("container", "红猫坐")),
    ]
    refs["the cat"] = "猫"
    f = suggestion_figures(issues, refs)
    assert (f["wrong_sides"], f["offered"], f["accepted"]) == (5, 3, 1)
    without = edit_distance("猫坐了", "红猫坐了") + edit_distance("大狗", "狗") + edit_distance("狗跑", "大狗跑了") \
        + edit_distance("狗", "大狗") + 0
    assert f["chars_to_edit_without"] == without == 5
    assert f["chars_to_edit_with"] == 0 + edit_distance("小狗", "狗") + 2 + 1 + 0 == 4
    oracle_review(issues, refs, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "corrections.jsonl").read_text(encoding="utf-8").splitlines()]
    how = {r["source"]: (r["origin"], r["typed"]) for r in rows}
    assert how["the red cat sat"] == ("suggestion", 0) and how["the dog"] == ("edited", 1)
    assert how["the big dog ran"] == ("edited", 2)
