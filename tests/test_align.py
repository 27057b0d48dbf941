"""Phrase references from sentence references: the projection on hand-made links, eflomal trained on a small corpus
made here, and the oracle judging a phrase side by a projection."""

import itertools

import pytest

from repair.errors import UserError
from repair.fileio import read_jsonl
from repair.review.align import (PhraseAligner, chinese_tokens, english_tokens, grow_diag_final_and, phrase_words,
                                 project)

ADJECTIVES = {"red": "红色", "big": "大", "small": "小", "old": "旧", "green": "绿色", "white": "白色"}
NOUNS = {"car": "汽车", "book": "书", "house": "房子", "cup": "杯子", "box": "盒子", "chair": "椅子"}
PLACES = {"in the kitchen": "在厨房里", "near the door": "在门旁边", "on the hill": "在山上"}
SUBJECTS = {"I": "我", "she": "她", "he": "他", "we": "我们"}
VERBS = {"see": "看见", "want": "想要", "like": "喜欢", "buy": "买"}
DETERMINERS = {"a": "一个", "this": "这个", "that": "那个"}


def small_corpus() -> list[tuple[str, str]]:
    """Sentences of a small grammar and their Chinese: every word in many contexts."""
    pairs = []
    for (a, az), (n, nz) in itertools.product(ADJECTIVES.items(), NOUNS.items()):
        for p, pz in PLACES.items():
            pairs.append((f"the {a} {n} is {p} .", f"{az}的{nz}{pz}。"))
        for (s, sz), (v, vz), (d, dz) in itertools.product(SUBJECTS.items(), VERBS.items(), DETERMINERS.items()):
            pairs.append((f"{s} {v} {d} {a} {n} .", f"{sz}{vz}{dz}{az}的{nz}。"))
    return pairs


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return PhraseAligner.train(small_corpus(), tmp_path_factory.mktemp("align"))


def test_grow_diag_final_and_keeps_the_intersection_and_grows_next_to_it():
    forward = {(0, 0), (1, 1), (3, 4)}
    reverse = {(0, 0), (1, 1), (1, 2), (4, 4)}
    links = grow_diag_final_and(forward, reverse)
    # (1, 2) neighbours (1, 1) and aligns target 2, not yet aligned; (3, 4) and (4, 4) neighbour no link: final-and
    # takes (3, 4), whose words neither are aligned, and then not (4, 4), whose target word is
    assert links == {(0, 0), (1, 1), (1, 2), (3, 4)}
    assert grow_diag_final_and({(0, 0), (2, 3)}, {(0, 0), (1, 2), (2, 3)}) == {(0, 0), (2, 3), (1, 2)}


def test_projection_is_the_shortest_stretch_covering_the_phrase_links():
    sentence, reference = "I saw the red car .", "我看见了那辆红色的车。"
    s, t = english_tokens(sentence), chinese_tokens(reference, "char")
    first, last = phrase_words(sentence, s, "the red car")
    assert (first, last) == (2, 4)
    # I-我 saw-看见 the-那辆 red-红色 car-车 .-。
    links = {(0, 0), (1, 1), (1, 2), (2, 4), (2, 5), (3, 6), (3, 7), (4, 9), (5, 10)}
    p = project(links, first, last, s, t, reference)
    assert (p.text, p.confidence, p.covered, p.consistent) == ("那辆红色的车", 1.0, 1.0, 1.0)
    p = project(links, 3, 4, s, t, reference)  # "red car": 的 inside the stretch has no link and stays
    assert p.text == "红色的车"
    # a link from outside the phrase into the stretch (saw-红) lowers its consistency; a word with no link, its cover
    p = project((links - {(2, 4), (2, 5)}) | {(1, 6)}, first, last, s, t, reference)
    assert p.text == "红色的车" and p.covered == pytest.approx(2 / 3, abs=1e-4) and p.consistent == 0.75
    assert p.confidence == pytest.approx(0.5, abs=1e-4)
    # "the" seldom linked in the corpus (90% of its occurrences): its missing link costs a tenth of a word
    p = project((links - {(2, 4), (2, 5)}) | {(1, 6)}, first, last, s, t, reference, {"the": 0.9})
    assert p.covered == pytest.approx(2.9 / 3, abs=1e-4) and p.consistent == 0.75
    assert project({(0, 0)}, first, last, s, t, reference) is None


def test_phrase_words_finds_a_phrase_the_parser_spaced_otherwise():
    sentence = "I don't like the old man's dog."
    tokens = english_tokens(sentence)
    assert phrase_words(sentence, tokens, "the old man 's dog") == (5, 10)
    assert [t.text for t in tokens[5:11]] == ["the", "old", "man", "'", "s", "dog"]
    assert phrase_words(sentence, tokens, "do n't") == (1, 3)
    assert phrase_words(sentence, tokens, "a cat") is None


def test_eflomal_learns_the_corpus_and_projects_a_phrase(tmp_path, trained):
    pairs, aligner = small_corpus(), trained
    assert aligner.info["pairs"] == len(pairs) and (aligner.folder / "priors.txt").stat().st_size > 0
    items = [("the green box is on the hill .", "绿色的盒子在山上。", "the green box"),
             ("we want a white chair .", "我们想要一个白色的椅子。", "a white chair"),
             ("the old cup is near the door .", "旧的杯子在门旁边。", "the old cup")]
    got = aligner.project(items)
    assert [p.text for p in got] == ["绿色的盒子", "一个白色的椅子", "旧的杯子"]
    assert all(p.confidence >= 0.5 for p in got)
    again = PhraseAligner.train(pairs, aligner.folder)  # the same corpus: the cached priors
    assert again.info["seconds"] == aligner.info["seconds"]
    with pytest.raises(UserError, match="review.projection.unit"):
        PhraseAligner.train(pairs, tmp_path / "other", unit="morpheme")


def rti_issue(sentence, container, rti, translations, issue_id):
    return {"id": issue_id, "relation": "rti", "sentence": sentence, "distance": 2, "evidence": [],
            "sides": [{"role": "container", "source": container, "translation": translations[0]},
                      {"role": "rti", "source": rti, "translation": translations[1]}]}


def test_the_oracle_judges_a_phrase_side_by_projection(tmp_path):
    from repair.stages import review

    data = tmp_path / "data"
    (data / "clean").mkdir(parents=True)
    pairs = small_corpus()
    (data / "clean" / "train.en").write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
    (data / "clean" / "train.zh").write_text("".join(z + "\n" for _, z in pairs), encoding="utf-8")
    sentence = "the white chair is in the kitchen ."
    # the container is the whole sentence (its own reference); the RTI has none: judged by its projection
    wrong = rti_issue(sentence, sentence, "the white chair", ["白色的椅子在厨房里。", "白色的书"], "i1")
    refs = {sentence: "白色的椅子在厨房里。"}
    corrections, stats = review.run(tmp_path / "review", [wrong], {"name": "oracle", "memory": False,
                                                                   "projection": {}},
                                    refs, aligner=review.phrase_aligner(data))
    assert stats["sides_by_projection"] == 1 and stats["sides_not_judged"] == 0
    assert stats["alignment"]["pairs"] == len(pairs) and stats["suggestions"]["by_projection"] == 1
    [c] = corrections
    assert (c["source"], c["correction"]) == ("the white chair", "白色的椅子")
    [line] = read_jsonl(tmp_path / "review" / "corrections.jsonl")
    assert line["reference"]["from"] == "projection" and line["reference"]["confidence"] >= 0.5
    # its projection agrees with the model's translation: judged right, no error
    right = rti_issue(sentence, sentence, "the white chair", ["白色的椅子在厨房里。", "白色的椅子"], "i1")
    corrections, stats = review.run(tmp_path / "again", [right], {"name": "oracle", "memory": False,
                                                                  "projection": {}},
                                    refs, aligner=review.phrase_aligner(data))
    assert corrections == [] and stats["sides_by_projection"] == 1 and stats["judged"] == 1 and stats["with_error"] == 0
    # projection off: the phrase side is not judged
    _, stats = review.run(tmp_path / "off", [wrong], {"name": "oracle", "memory": False, "projection": False},
                          refs, aligner=review.phrase_aligner(data))
    assert stats["sides_by_projection"] == 0 and stats["sides_not_judged"] == 1 and stats["not_judged"] == 1


def test_projection_options_name_the_bad_key():
    from repair.stages.review import projection_options

    assert projection_options(None)["threshold"] == 0.8
    with pytest.raises(UserError, match="review.projection.threshold"):
        projection_options({"threshold": 2})
    with pytest.raises(UserError, match="has no key 'treshold'"):
        projection_options({"treshold": 0.5})


SENTENCE = "we want a white chair ."
# the reviewer corrects the sentence (issue 1's container); issue 2's sides were cut from it
WHOLE = rti_issue(SENTENCE, SENTENCE, "a white chair", ["我们想要一个白色的书。", "一个白色的书"], "s1")
PARTS = rti_issue(SENTENCE, "a white chair", "white chair", ["一个白色的书", "白色的书"], "s2")


def test_the_page_prefills_the_phrases_of_a_corrected_sentence(tmp_path, trained):
    from starlette.testclient import TestClient

    from repair.review.web import create_app

    app = create_app([WHOLE, PARTS], tmp_path / "review", aligner=trained)
    client = TestClient(app, base_url="http://127.0.0.1")
    headers = {"X-Review-Token": app.state.token}
    assert client.get("/api/state", headers=headers).json()["projected"] == {}
    r = client.post("/api/judge", headers=headers, json={
        "issue": "s1", "wrong": ["container"], "kind": "word/phrase mistranslation",
        "corrections": {"container": "我们想要一个白色的椅子。"}}).json()
    got = {p: x["text"] for p, x in r["projected"].items()}
    assert got == {"a white chair": "一个白色的椅子", "white chair": "白色的椅子"}
    assert all(x["sentence"] == SENTENCE and x["confidence"] > 0 for x in r["projected"].values())
    assert client.get("/api/state", headers=headers).json()["projected"]["white chair"]["text"] == "白色的椅子"
    app.state.store.close()
    # without an aligner nothing is projected
    plain = create_app([WHOLE, PARTS], tmp_path / "plain")
    assert TestClient(plain, base_url="http://127.0.0.1").get(
        "/api/state", headers={"X-Review-Token": plain.state.token}).json()["projected"] == {}
    plain.state.store.close()


def test_the_page_projects_a_sentence_correction_before_it_is_saved(tmp_path, trained):
    """/api/project: a draft correction of an issue's sentence, projected onto the phrases cut from it (what the page
    pre-fills the same issue's phrase sides with); nothing is recorded; a sentence no issue holds is refused."""
    from starlette.testclient import TestClient

    from repair.review.web import create_app

    app = create_app([WHOLE, PARTS], tmp_path / "review", aligner=trained)
    client = TestClient(app, base_url="http://127.0.0.1")
    headers = {"X-Review-Token": app.state.token}
    r = client.post("/api/project", headers=headers, json={"sentence": SENTENCE, "correction": "我们想要一个白色的椅子。"})
    assert r.status_code == 200
    assert {p: x["text"] for p, x in r.json()["projected"].items()} == {"a white chair": "一个白色的椅子",
                                                                       "white chair": "白色的椅子"}
    assert client.get("/api/state", headers=headers).json()["projected"] == {}  # a draft: nothing recorded
    assert app.state.store.stats()["judged"] == 0
    bad = client.post("/api/project", headers=headers, json={"sentence": "we want a red chair .", "correction": "x"})
    assert bad.status_code == 400 and "unknown sentence" in bad.json()["error"]
    assert client.post("/api/project", headers=headers, json=["x"]).status_code == 400
    assert client.post("/api/project", json={"sentence": SENTENCE, "correction": "x"}).status_code == 403
    app.state.store.close()


def test_the_sheet_suggests_the_projection_on_a_rerun(tmp_path, trained):
    import csv

    from repair.review.sheet import ReviewPending, file_review

    def rows():
        with open(tmp_path / "sheet.csv", encoding="utf-8-sig", newline="") as f:
            return list(csv.DictReader(f))

    with pytest.raises(ReviewPending):
        file_review([WHOLE, PARTS], tmp_path, aligner=trained)
    first = rows()
    assert first[1]["suggested_1"] == "" and first[1]["suggested_2"] == ""
    first[0].update(wrong_1="yes", wrong_2="no", kind="word/phrase mistranslation", corrected_1="我们想要一个白色的椅子。")
    with open(tmp_path / "sheet.csv", "w", encoding="utf-8-sig", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(first[0]), lineterminator="\r\n")
        w.writeheader()
        w.writerows(first)
    with pytest.raises(ReviewPending, match="1 of 2"):
        file_review([WHOLE, PARTS], tmp_path, aligner=trained)
    again = rows()
    assert (again[1]["suggested_1"], again[1]["suggested_2"]) == ("一个白色的椅子", "白色的椅子")
    assert again[0]["wrong_1"] == "yes" and again[0]["corrected_1"] == "我们想要一个白色的椅子。"  # kept as judged
    again[1].update(wrong_1="yes", wrong_2="yes", kind="word/phrase mistranslation",
                    corrected_1=again[1]["suggested_1"], corrected_2=again[1]["suggested_2"])
    with open(tmp_path / "sheet.csv", "w", encoding="utf-8-sig", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(again[0]), lineterminator="\r\n")
        w.writeheader()
        w.writerows(again)
    corrections = file_review([WHOLE, PARTS], tmp_path, aligner=trained)
    assert {(c["source"], c["correction"]) for c in corrections} == {
        (SENTENCE, "我们想要一个白色的椅子。"), ("a white chair", "一个白色的椅子"), ("white chair", "白色的椅子")}


def test_the_suggestion_figures_count_what_the_projections_prefill(trained):
    from repair.review.oracle import phrase_sides, projection_agreement, suggestion_figures

    refs = {SENTENCE: "我们想要一个白色的椅子。", "a white chair": "一个白色的椅子", "white chair": "白色的椅子"}
    items = phrase_sides([WHOLE, PARTS], refs)
    assert [p for _, _, p in items] == ["a white chair", "white chair"]
    projected = {(s, p): x for (s, _, p), x in zip(items, trained.project(items))}
    agreement = projection_agreement([WHOLE, PARTS], refs, projected)
    assert (agreement["sides"], agreement["equal"], agreement["equal_share"]) == (2, 2, 1.0)
    f = suggestion_figures([WHOLE, PARTS], refs, None, projected)
    # issue 1 corrects the sentence, and its RTI is pre-filled at once with the projection of that correction;
    # issue 2's container was corrected in issue 1 (its own earlier correction), its RTI is pre-filled by projection
    assert (f["wrong_sides"], f["projected_prefills"], f["projected_equal"], f["by_projection"]) == (4, 2, 2, 0)
    # 一个白色的书 -> 一个白色的椅子 and 白色的书 -> 白色的椅子: 2 characters each, none typed with the projections
    assert f["chars_to_edit_without_projection"] - f["chars_to_edit_without"] == 4


def test_the_report_says_how_many_sides_were_judged_by_projection():
    from repair.report import projection_markdown, suggestions_markdown

    review = {"alignment": {"pairs": 50000, "unit": "word", "seconds": 62.4}, "sides_by_projection": 28,
              "corrections_by_projection": 20, "sides_not_judged": 3,
              "projection": {"sides": 10, "projected": 9, "equal": 6, "equal_share": 0.6, "threshold": 0.5,
                             "by_confidence": {">=0.5": {"sides": 8, "equal": 6}, ">=0.8": {"sides": 5, "equal": 4},
                                               ">=1.0": {"sides": 3, "equal": 3}}}}
    text = "\n".join(projection_markdown(review))
    assert "50000 training pairs" in text and "62.4 s" in text
    assert "judged by the projection of their sentence's reference: **28** (20 corrections" in text
    assert "**6 of 10 (60%)** equal" in text and "confidence ≥ 0.5, 6 of 8 equal" in text
    assert projection_markdown({"sides_by_projection": 0}) == []
    lines = suggestions_markdown({"wrong_sides": 4, "offered": 0, "accepted": 0, "chars_to_edit_with": 4,
                                  "chars_to_edit_without": 4, "by_projection": 0, "projected_prefills": 1,
                                  "projected_equal": 1, "chars_to_edit_without_projection": 6})
    assert "pre-filled with the projection of their sentence's correction (earlier or in the same issue): 1, 1 of them" \
        in lines[1]
    assert "4 against 6 without the projections" in lines[1]


def test_the_review_memory_learns_the_terms_a_word_aligns_to(trained):
    """A sentence's correction rewrites more than one word's translation: with the alignment, each word learns only
    the terms in the stretch it aligns to; without it, every term of the correction."""
    from repair.review.memory import ReviewMemory

    stop = ["的", "了", "，", "。"]
    plain, aligned = ReviewMemory(stop, rare=0), ReviewMemory(stop, rare=0, aligner=trained)
    for m in (plain, aligned):
        m.learn("we want a white chair .", "我们想要一个红色的盒子。", "我们想要一个白色的椅子。")
    assert plain.terms("the white box", "红色的盒子") == {"white": ["椅子", "白色"]}
    assert aligned.terms("the white box", "红色的盒子") == {"white": ["白色"]}
    assert aligned.terms("the red chair", "红色的盒子") == {"chair": ["椅子"]}
    assert aligned.aligned("we want a white chair .", "我们想要一个白色的椅子。", ["white", "chair", "sofa"]) == {
        "white": "白色", "chair": "椅子", "sofa": None}


def test_a_pairs_links_are_made_once_and_read_back(tmp_path, trained):
    """eflomal takes no seed: the links of a pair aligned after the corpus are kept beside its priors and read back,
    by the same aligner and by another on the same folder, so two reviews of the same issues project alike."""
    import shutil

    from repair.review.align import LINKS

    folder = tmp_path / "align"
    shutil.copytree(trained.folder, folder)
    (folder / LINKS).unlink(missing_ok=True)
    items = [("the green box is on the hill .", "绿色的盒子在山上。", "the green box"),
             ("we want a white chair .", "我们想要一个白色的椅子。", "a white chair")]
    aligner = PhraseAligner(folder)
    first = aligner.project(items)
    lines = (folder / LINKS).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    again = PhraseAligner(folder)
    assert again.project(items) == first and aligner.project(items[:1]) == first[:1]
    assert (folder / LINKS).read_text(encoding="utf-8").splitlines() == lines  # nothing aligned again
    # a new pair is aligned and added; a line a crash cut short is skipped and the next starts afresh
    with open(folder / LINKS, "a", encoding="utf-8") as f:
        f.write('{"key": "cut')
    third = PhraseAligner(folder).project([("the old cup is near the door .", "旧的杯子在门旁边。", "the old cup")])
    assert third[0].text == "旧的杯子"
    assert len(PhraseAligner(folder)._known_links()) == 3
