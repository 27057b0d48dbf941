"""What the suggestion step asks the constrained search for, on hand-made translations (no model)."""

from __future__ import annotations

from repair.purity.relations.base import Case
from repair.purity.suggest import replace_requests, requests_for, splice_containers, spliced


def _rti_issue(container: str, rti: str) -> tuple[dict, Case]:
    case = Case("rti", container, (("container", container), ("rti", rti)), (container, rti))
    return {"id": case.id, "relation": "rti"}, case


def test_a_spliced_container_begins_with_its_own_first_words():
    container, rti = "the old man reads a red book .", "a red book"
    translation = {container: "老人读一本蓝色的书。", rti: "一本红色的书"}
    issue, case = _rti_issue(container, rti)
    first = splice_containers(requests_for([issue], {case.id: case}, translation, ""), [issue], translation, "")
    request = next(r for r in first if r.role == "container")
    assert request.constraints == ("老人读", "一本红色的书", "。") and request.starts
    assert spliced("老人读一本蓝色的书。", ["一本红色的书"]) == (request.constraints, True)
    assert not spliced("老人读一本蓝色的书。", ["一本红色的书"], margin=1)[1]  # the search fills the margin
    # an RTI whose span is the container translation's beginning: its own translation begins the output
    translation[container] = "一本蓝色的书在桌子上。"
    request = next(r for r in splice_containers(requests_for([issue], {case.id: case}, translation, ""), [issue],
                                                translation, "") if r.role == "container")
    assert request.constraints[0] == "一本红色的书" and request.starts
    # the n-best list of the RTI has nothing to begin with
    assert not next(r for r in first if r.role == "rti").starts


def test_a_container_with_no_close_span_is_not_anchored_at_the_start():
    container, rti = "the old man reads a red book .", "a red book"
    translation = {container: "老人在读书。", rti: "一只黑猫"}
    issue, case = _rti_issue(container, rti)
    request = next(r for r in splice_containers(requests_for([issue], {case.id: case}, translation, ""), [issue],
                                                translation, "") if r.role == "container")
    assert request.constraints == ("一只黑猫",) and not request.starts


def test_replace_requests_keep_the_partners_beginning_first():
    original, mutant = "the man reads a book .", "the man reads a letter ."
    case = Case("replace", original, (("original", original), ("mutant", mutant)), (original, mutant, "book", "letter"))
    translation = {original: "那个男人读一本书。", mutant: "男人读了一封信。", "book": "书", "letter": "信"}
    requests = replace_requests(0, {"id": case.id}, case, translation, "")
    by_role = {r.role: r for r in requests}
    assert by_role["mutant"].constraints == ("那个男人读一本", "信", "。") and by_role["mutant"].starts
    assert by_role["original"].constraints == ("男人读了一封", "书", "。") and by_role["original"].starts


def test_repeated_spans_are_those_said_twice():
    from repair.purity.suggest import repeated

    assert repeated("一位歌手写了一位歌手写的诗", 4) == {"一位歌手", "位歌手写"}
    assert repeated("美丽的桥上的美丽的司机", 4) == set()  # three characters twice: a word said of two things
    assert repeated("好，好，好，好", 3) == set()  # punctuation is not a repetition of words
    assert repeated("a  b c a b c", 3) == {"abc"}  # whitespace aside


def test_a_hypothesis_that_says_a_span_twice_is_passed_over_for_the_next():
    from repair.nmt.constrained import Hypothesis
    from repair.purity.relations.rti import RTIRelation
    from repair.purity.suggest import Search

    container, rti = "the old man reads a red book that a singer wrote .", "a red book that a singer wrote"
    translation = {container: "老人读一本蓝色的书。", rti: "一位歌手写的一本红色的书"}
    issue, case = _rti_issue(container, rti)
    issue["suggestions"] = []
    request = next(r for r in splice_containers(requests_for([issue], {case.id: case}, translation, ""), [issue],
                                                translation, "") if r.role == "container")
    twice = Hypothesis("老人读一位歌手写了一位歌手写的一本红色的书。", -0.1, True)
    once = Hypothesis("老人读一位歌手写的一本红色的书。", -0.3, True)
    relations = {"rti": RTIRelation(stopwords=[])}
    for repeat_chars, offered in ((4, once.text), (None, twice.text)):
        issue["suggestions"] = []
        search = Search(None, [issue], {case.id: case}, relations, translation, beam=3, nbest_beam=10, min_score=-1.0,
                        repeat_chars=repeat_chars)
        assert search.offer(request, [twice, once])
        assert [s["text"] for s in issue["suggestions"]] == [offered]


def test_a_replace_request_whose_first_phrase_follows_the_word_is_not_anchored():
    original, mutant = "books are here .", "letters are here ."
    case = Case("replace", original, (("original", original), ("mutant", mutant)), (original, mutant, "books", "letters"))
    translation = {original: "书在这里。", mutant: "信在这里。", "books": "书", "letters": ""}
    by_role = {r.role: r for r in replace_requests(0, {"id": case.id}, case, translation, "")}
    assert by_role["mutant"].constraints == ("在这里。",) and not by_role["mutant"].starts
