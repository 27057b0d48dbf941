"""What the suggestion step asks the constrained search for, on hand-made translations (no model)."""

from __future__ import annotations

from repair.purity.relations.base import Case
from repair.purity.suggest import replace_requests, requests_for, splice_containers, spliced


def first_splices(*args, **kw):
    return splice_containers(*args, **kw)[0]


def _rti_issue(container: str, rti: str) -> tuple[dict, Case]:
    case = Case("rti", container, (("container", container), ("rti", rti)), (container, rti))
    return {"id": case.id, "relation": "rti"}, case


def test_a_spliced_container_begins_with_its_own_first_words():
    container, rti = "the old man reads a red book .", "a red book"
    translation = {container: "老人读一本蓝色的书。", rti: "一本红色的书"}
    issue, case = _rti_issue(container, rti)
    first = first_splices(requests_for([issue], {case.id: case}, translation, ""), [issue], translation, "")
    request = next(r for r in first if r.role == "container")
    assert request.constraints == ("老人读", "一本红色的书", "。") and request.starts
    assert spliced("老人读一本蓝色的书。", ["一本红色的书"]) == (request.constraints, True)
    assert not spliced("老人读一本蓝色的书。", ["一本红色的书"], margin=1)[1]  # the search fills the margin
    # an RTI whose span is the container translation's beginning: its own translation begins the output
    translation[container] = "一本蓝色的书在桌子上。"
    request = next(r for r in first_splices(requests_for([issue], {case.id: case}, translation, ""), [issue],
                                                translation, "") if r.role == "container")
    assert request.constraints[0] == "一本红色的书" and request.starts
    # the n-best list of the RTI has nothing to begin with
    assert not next(r for r in first if r.role == "rti").starts


def test_a_container_with_no_close_span_is_not_anchored_at_the_start():
    container, rti = "the old man reads a red book .", "a red book"
    translation = {container: "老人在读书。", rti: "一只黑猫"}
    issue, case = _rti_issue(container, rti)
    request = next(r for r in first_splices(requests_for([issue], {case.id: case}, translation, ""), [issue],
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


def test_a_replace_request_splices_the_first_context_the_partner_holds():
    original, mutant = "How many cats do you have?", "How many dogs do you have?"
    texts = (original, mutant, "How many cats", "How many dogs", "How many cats?", "How many dogs?")
    case = Case("replace", original, (("original", original), ("mutant", mutant)), texts)
    # the phrase alone (多少) is not in the other side's translation; closed as the question it is (几只, 几条)
    translation = {original: "你有几只猫？", mutant: "你有几条狗？", "How many cats": "多少猫", "How many dogs": "多少狗",
                   "How many cats?": "几只猫？", "How many dogs?": "几条狗？"}
    by_role = {r.role: r for r in replace_requests(0, {"id": case.id}, case, translation, "")}
    assert by_role["mutant"].constraints == ("你有", "几条狗？")
    assert by_role["original"].constraints == ("你有", "几只猫？")


def test_repeated_spans_are_those_said_twice():
    from repair.purity.suggest import repeated

    assert repeated("一位歌手写了一位歌手写的诗", 4) == {"一位歌手", "位歌手写"}
    assert repeated("美丽的桥上的美丽的司机", 4) == set()  # three characters twice: a word said of two things
    assert repeated("好，好，好，好", 3) == set()  # punctuation is not a repetition of words
    assert repeated("a  b c a b c", 3) == {"abc"}  # whitespace aside


def test_a_hypothesis_that_says_a_span_twice_is_passed_over_for_the_next():
    from repair.nmt.search import Hypothesis
    from repair.purity.relations.rti import RTIRelation
    from repair.purity.suggest import Search

    container, rti = "the old man reads a red book that a singer wrote .", "a red book that a singer wrote"
    translation = {container: "老人读一本蓝色的书。", rti: "一位歌手写的一本红色的书"}
    issue, case = _rti_issue(container, rti)
    issue["suggestions"] = []
    request = next(r for r in first_splices(requests_for([issue], {case.id: case}, translation, ""), [issue],
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


def test_parts_of_the_container_that_may_render_the_rti():
    from repair.purity.suggest import span_candidates

    parts = span_candidates("五间美丽的厨房附近的勇敢的新男人每天给这幅信。", "勇敢的新老师")
    assert "勇敢的新男人" in parts  # the container's rendering: the model scores it as the RTI's translation
    assert "勇敢的新老师" not in parts
    assert all(p[0] not in "的，。" and p[-1] not in "的，。" for p in parts)
    assert all(p[0] == "勇" or p[-1] == "师" for p in parts)  # shares the RTI translation's first or last character
    assert span_candidates("", "勇敢的新老师") == [] and span_candidates("勇敢的新男人", " ") == []


def test_an_rti_that_overlaps_the_end_of_its_container_is_spliced_there():
    from repair.purity.suggest import closest_span, edge_overlap

    # the container's translation stops where the RTI's translation goes on: one character in common
    assert edge_overlap("一座白色的图书馆后面的桥", "桥旁边的朋友") == (11, 12)
    assert spliced("一座白色的图书馆后面的桥", ["桥旁边的朋友"]) == (("一座白色的图书馆后面的", "桥旁边的朋友"), True)
    assert spliced("一座白色的图书馆后面的桥。", ["桥旁边的朋友"])[0] == ("一座白色的图书馆后面的", "桥旁边的朋友", "。")
    assert edge_overlap("朋友在桥上", "桥旁边的朋友") == (0, 2)  # the container begins with the RTI's last words
    assert edge_overlap("一座图书馆后面的", "的朋友") is None  # 的 alone is no overlap
    assert closest_span("一只猫", "两条狗") is None


def test_a_trimmed_splice_leaves_the_next_phrase_its_first_word():
    container, rti = "a happy cat on a desk beside a red table", "a desk beside a red table"
    translation = {container: "一张红色的桌子旁边的一只快乐的猫", rti: "一张红色的桌子旁边的一张书桌"}
    # the closest span ends in the 一 of 一只: spliced as it is, the search must write 只快乐的猫
    assert spliced(translation[container], [translation[rti]]) == (("一张红色的桌子旁边的一张书桌", "只快乐的猫"), True)
    assert spliced(translation[container], [translation[rti]], trim=1)[0] == ("一张红色的桌子旁边的一张书桌", "一只快乐的猫")
    issue, case = _rti_issue(container, rti)
    requests = requests_for([issue], {case.id: case}, translation, "")
    first, extra = splice_containers(requests, [issue], translation, "", trim=1)
    assert [r.constraints for r in extra] == [("一张红色的桌子旁边的一张书桌", "一只快乐的猫")]
    assert next(r for r in first if r.role == "container").constraints == ("一张红色的桌子旁边的一张书桌", "只快乐的猫")
    assert splice_containers(requests, [issue], translation, "", trim=0)[1] == []


class Scores:
    """The model's scores as a table: the one thing Search.spans asks of the translator."""

    def __init__(self, table: dict):
        self.table, self.asked = table, []

    def score(self, sources, targets):
        self.asked.append(len(sources))
        return [self.table.get((s, t), -5.0) for s, t in zip(sources, targets)]


def test_the_rti_is_offered_the_containers_rendering_the_model_scores_as_high():
    from repair.purity.relations.rti import RTIRelation
    from repair.purity.suggest import Search

    container, rti = "the brave new man near five kitchens", "the brave new man"
    translation = {container: "五间厨房附近的勇敢的新男人", rti: "勇敢的新老师"}
    issue, case = _rti_issue(container, rti)
    issue["suggestions"] = []
    relations = {"rti": RTIRelation(stopwords=[])}
    for own, theirs, container_own, given in ((-0.9, -0.1, -0.2, True), (-0.1, -0.15, -0.2, True),
                                              (-0.1, -0.3, -0.2, False), (-0.9, -0.1, -1.5, False)):
        issue["suggestions"] = []
        scores = Scores({(rti, "勇敢的新老师"): own, (rti, "勇敢的新男人"): theirs,
                         (container, translation[container]): container_own})
        search = Search(scores, [issue], {case.id: case}, relations, translation, beam=3, nbest_beam=10,
                        min_score=-1.0)
        assert search.spans(0.1, 2, "") == ({0} if given else set())
        assert [s["text"] for s in issue["suggestions"]] == (["勇敢的新男人"] if given else [])
        # one pass for the sides' own translations, one for all the parts; none for the parts of a container
        # whose own translation scores below min_score
        assert len(scores.asked) == (1 if container_own < -1.0 else 2)
        if given:
            assert issue["suggestions"][0]["role"] == "rti" and issue["suggestions"][0]["score"] == theirs
