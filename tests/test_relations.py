"""Test relations as objects: the interface, RTI and word replacement on one batch, old records, the distance
and the filters of the replacement relation."""

import json

import pytest

from repair.errors import UserError
from repair.fileio import read_jsonl
from repair.issues import check_issue, issue_id, read_issues, upgrade
from repair.purity import bow_distance, run_purity
from repair.purity.relations import RELATIONS, Case, Parsed, ReplaceRelation, RTIRelation, make_relations
from repair.purity.relations.replace import article_fits, replace_word, tagged_leaves
from repair.purity.translators import Translator
from repair.review.oracle import oracle_review
from repair.review.sheet import ReviewPending, file_review
from repair.review.store import CorrectionStore

FISH = ("(ROOT (S (NP (DT The) (JJ old) (NN fisherman)) (VP (VBD sold) (NP (CD three) (JJ fresh) (NNS fish)) "
        "(PP (TO to) (NP (DT the) (JJ busy) (NN market)))) (. .)))")
FISH_TEXT = "The old fisherman sold three fresh fish to the busy market."
BOAT = "(ROOT (S (NP (DT The) (JJ young) (NN farmer)) (VP (VBD bought) (NP (DT an) (JJ old) (NN boat))) (. .)))"
BOAT_TEXT = "The young farmer bought an old boat."
PARSED = [Parsed("in.txt:1", FISH_TEXT, FISH), Parsed("in.txt:2", BOAT_TEXT, BOAT)]

LEXICON = {"the": "这", "old": "老", "young": "年轻", "fisherman": "渔夫", "farmer": "农民", "sold": "卖了",
           "bought": "买了", "three": "三条", "fresh": "新鲜", "fish": "鱼", "to": "给", "busy": "繁忙",
           "market": "市场", "an": "一艘", "boat": "船", ".": "。", "red": "红"}


class WordByWord(Translator):
    """A user's translator: a dictionary, word by word (unknown words kept as they are), that leaves out `drop`
    in texts of more than four words; counts its calls."""

    name = "word-by-word"

    def __init__(self, drop: str = ""):
        self.calls, self.drop = [], drop

    def translate(self, texts):
        self.calls.append(list(texts))
        out = []
        for t in texts:
            words = t.replace(".", " .").lower().split()
            out.append("".join(LEXICON.get(w, w) for w in words if w != self.drop or len(words) <= 4))
        return out


def test_the_registry_names_the_relations_and_refuses_others():
    assert set(RELATIONS) == {"rti", "replace"}
    rti, replace = make_relations(["rti", "replace"], {"unit": "char"})
    assert isinstance(rti, RTIRelation) and isinstance(replace, ReplaceRelation)
    with pytest.raises(UserError, match=r"purity.relations=\['rti', 'sit'\]: choose one or more of rti, replace"):
        make_relations(["rti", "sit"])
    with pytest.raises(UserError, match=r"purity.replace has no option 'bogus' \(its options: unit, .*mlm_model, .*tagger\)"):
        make_relations(["replace"], options={"replace": {"bogus": 1}})
    with pytest.raises(UserError, match=r"purity.rti has no option 'per_word' \(its options: unit, max_words, "):
        make_relations(["rti"], options={"rti": {"per_word": 2}})


def test_rti_relation_cases_and_distance_are_purity_s():
    (rti,) = make_relations(["rti"])
    cases = rti.cases(PARSED[:1])
    assert [tuple(r for r, _ in c.sides) for c in cases] == [("container", "rti")] * len(cases)
    assert {c.sides[1][1] for c in cases} == {"three fresh fish"}  # "the busy market": 2 content words
    case = cases[0]
    translation = {case.texts[0]: "老渔夫卖了三条鱼给市场。", case.texts[1]: "三条新鲜鱼"}
    check = rti.check(case, translation)
    assert check.distance == bow_distance(translation[case.texts[1]], translation[case.texts[0]]) == 2
    assert check.evidence == ("新", "鲜")
    assert case.id == issue_id([case.sides[0][1], case.sides[1][1]])
    assert rti.counts() == {"rtis": 1}


def test_both_relations_share_one_batch_of_unique_texts(tmp_path):
    translator = WordByWord(drop="fresh")
    summary = run_purity([FISH_TEXT, BOAT_TEXT], None, translator, tmp_path, trees=[FISH, BOAT],
                         relations=["rti", "replace"], relation_options={"replace": {"min_context": 0}})
    (batch,) = translator.calls
    assert len(batch) == len(set(batch)) == summary["texts"]
    by = summary["by_relation"]
    assert set(by) == {"rti", "replace"} and by["rti"]["cases"] > 0 and by["replace"]["cases"] > 0
    assert summary["pairs"] == by["rti"]["cases"] + by["replace"]["cases"]
    assert all(summary["issues"][d] == by["rti"]["issues"][d] + by["replace"]["issues"][d] for d in summary["issues"])
    issues = read_jsonl(tmp_path / "issues.jsonl")
    # "fresh" is lost in long texts alone: the sentence lacks what the RTI has; original and mutant lose it alike
    assert {i["relation"] for i in issues} == {"rti"}
    for i in issues:
        assert set(i) >= {"id", "relation", "distance", "sides"} and i["id"] == issue_id([s["source"] for s in i["sides"]])
    cases = read_jsonl(tmp_path / "pairs.jsonl")
    assert {c["relation"] for c in cases} == {"rti", "replace"}
    assert summary["settings"]["relations"] == ["rti", "replace"]


def test_replace_distance_is_what_changed_beyond_the_replaced_word():
    relation = ReplaceRelation()
    case = Case("replace", "a", (("original", "A red cat sat."), ("mutant", "A red dog sat.")),
                ("A red cat sat.", "A red dog sat.", "cat", "dog"), {"replaced": ["cat", "dog"]})
    same = {"A red cat sat.": "一只红猫坐着。", "A red dog sat.": "一只红狗坐着。", "cat": "猫", "dog": "狗"}
    assert relation.check(case, same).distance == 0
    changed = {**same, "A red dog sat.": "一只狗站着。"}
    check = relation.check(case, changed)
    assert sorted(check.evidence) == sorted(["坐", "红", "站"]) and check.distance == 3
    # a word translated alone the way it is in the sentence costs nothing; stop tokens never count
    assert relation.check(case, {**same, "A red dog sat.": "一只红的狗坐着了。"}).distance == 0


def test_replace_filters_part_of_speech_article_context_and_names(tmp_path):
    corpus = tmp_path / "corpus.en"
    corpus.write_text("The old farmer sold apples .\nthe busy port was full\n", encoding="utf-8")
    relation = ReplaceRelation(corpus=str(corpus), per_word=3, candidates="context")
    cases = relation.cases(PARSED)
    mutants = {c.sides[1][1] for c in cases}
    # fisherman -> farmer: seen beside both neighbours in the corpus ("old farmer", "farmer sold")
    assert "The old farmer sold three fresh fish to the busy market." in mutants
    # "an old boat": no candidate adjective starts with a vowel, so no "an young boat"
    assert not any(" an young " in m or " an busy " in m or " an fresh " in m for m in mutants)
    assert relation.counts()["filtered"]["article"] > 0
    for c in cases:
        tag = c.info["tag"]
        assert tag in ("NN", "NNS", "JJ")
        old, new = c.info["replaced"]
        assert (tag, new) in {(t, w.lower()) for p in PARSED for t, w, _ in tagged_leaves(p.tree)}
        assert replace_word(c.sentence, old, 0, new) or c.sentence.startswith(old.capitalize())
    # without any context seen, nothing passes min_context=2 ... and min_context=0 lets candidates through
    bare = ReplaceRelation(min_context=2)
    assert bare.cases(PARSED) == [] and bare.counts()["filtered"]["context"] > 0
    assert all(c.info["replaced"] for c in ReplaceRelation(min_context=0).cases(PARSED))
    assert ReplaceRelation(min_context=0).cases(PARSED)
    # a capitalized word inside a sentence is a name: left alone
    name = Parsed("x:1", "We met Rose at the old market.",
                  "(ROOT (S (NP (PRP We)) (VP (VBD met) (NP (NN Rose)) (PP (IN at) (NP (DT the) (JJ old) (NN market)))) (. .)))")
    assert not any(c.info["replaced"][0] == "rose" for c in ReplaceRelation(min_context=0).cases([name, *PARSED]))


def test_replace_word_and_article_rules():
    assert replace_word("the dog saw the dog .", "dog", 1, "cat") == "the dog saw the cat ."
    assert replace_word("the dog's bone", "dog", 0, "cat") == "the cat's bone"
    assert replace_word("hotdog", "dog", 0, "cat") is None
    assert article_fits("an", "apple") and article_fits("a", "pear") and not article_fits("a", "apple")


def test_replace_lexicon_source_and_bad_options(tmp_path):
    lexicon = tmp_path / "lexicon.jsonl"
    lexicon.write_text(json.dumps({"tag": "NN", "words": ["fisherman", "farmer", "sailor"]}) + "\n", encoding="utf-8")
    cases = ReplaceRelation(candidates="lexicon", lexicon=str(lexicon), min_context=0).cases(PARSED)
    assert {tuple(c.info["replaced"]) for c in cases} == {("fisherman", "farmer"), ("fisherman", "sailor"),
                                                          ("farmer", "fisherman"), ("farmer", "sailor")}
    lexicon.write_text('{"tag": "VB", "words": ["go"]}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"lexicon.jsonl:1: expected"):
        ReplaceRelation(candidates="lexicon", lexicon=str(lexicon))
    with pytest.raises(UserError, match="candidates=lexicon needs purity.replace.lexicon"):
        ReplaceRelation(candidates="lexicon")
    with pytest.raises(UserError, match="candidates=.bert.: choose one of auto, vectors, context, lexicon, mlm"):
        ReplaceRelation(candidates="bert")
    with pytest.raises(UserError, match="per_word=0"):
        ReplaceRelation(per_word=0)
    with pytest.raises(UserError, match=r"mlm_model='.*no-model': give a local folder with a masked language model"):
        ReplaceRelation(candidates="mlm", mlm_model=str(tmp_path / "no-model"))


OLD_RECORD = {"id": issue_id(["the clever boy's dog", "the clever boy"]), "sentence": "I saw the clever boy's dog.",
              "container": "the clever boy's dog", "container_translation": "男孩的聪明的狗",
              "rti": "the clever boy", "rti_translation": "聪明的男孩", "distance": 1, "missing": ["聪"]}


def test_old_rti_records_load_and_keep_their_judgments(tmp_path):
    new = upgrade(OLD_RECORD)
    assert new["relation"] == "rti" and new["evidence"] == ["聪"] and new["id"] == OLD_RECORD["id"]
    assert new["sides"] == [{"role": "container", "source": "the clever boy's dog", "translation": "男孩的聪明的狗"},
                            {"role": "rti", "source": "the clever boy", "translation": "聪明的男孩"}]
    path = tmp_path / "issues.jsonl"
    path.write_text(json.dumps(OLD_RECORD, ensure_ascii=False) + "\n" + '{"id": "x", "sides": []}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"issues.jsonl:2: issue x lacks 'sides'"):
        read_issues(path)
    with pytest.raises(UserError, match=r"where:1: issue y: each side needs its own role"):
        check_issue({"id": "y", "sides": [{"role": "a", "source": "s", "translation": "t"}] * 2}, "where:1")
    # a judgment logged against the old record is read with the upgraded one
    review = tmp_path / "review"
    (review).mkdir()
    (review / "judgments.jsonl").write_text(json.dumps(
        {"issue": OLD_RECORD["id"], "wrong": ["container"], "kind": "incorrect modification",
         "corrections": {"container": "聪明的男孩的狗"}, "time": "t"}, ensure_ascii=False) + "\n", encoding="utf-8")
    path.write_text(json.dumps(OLD_RECORD, ensure_ascii=False) + "\n", encoding="utf-8")
    with CorrectionStore(review, read_issues(path)) as store:  # old records are upgraded where they are read
        (c,) = store.corrections()
    assert (c["source"], c["translation"], c["correction"]) == ("the clever boy's dog", "男孩的聪明的狗", "聪明的男孩的狗")


def test_a_sheet_in_the_old_columns_is_still_read(tmp_path):
    (tmp_path / "issues.jsonl").write_text(json.dumps(OLD_RECORD, ensure_ascii=False) + "\n", encoding="utf-8")
    old = read_issues(tmp_path / "issues.jsonl")
    with pytest.raises(ReviewPending):
        file_review(old, tmp_path)
    (tmp_path / "sheet.jsonl").unlink()
    (tmp_path / "sheet.csv").write_text(
        "id,container,container_translation,rti,rti_translation,missing,container_wrong,rti_wrong,kind,"
        "corrected_container_translation,corrected_rti_translation\n"
        f"{OLD_RECORD['id']},the clever boy's dog,男孩的聪明的狗,the clever boy,聪明的男孩,聪,no,yes,under,,那个聪明的男孩\n",
        encoding="utf-8")
    (c,) = file_review(old, tmp_path)
    assert (c["source"], c["correction"]) == ("the clever boy", "那个聪明的男孩")


def test_oracle_sheet_and_store_handle_a_replace_issue(tmp_path):
    translator = WordByWord()
    run_purity([FISH_TEXT], None, translator, tmp_path / "run", trees=[FISH], relations=["replace"],
               relation_options={"replace": {"min_context": 0}}, thresholds=[0])
    (case,) = [c for c in read_jsonl(tmp_path / "run" / "pairs.jsonl")][:1]
    original, mutant = (s["source"] for s in case["sides"])
    issue = {"id": case["id"], "relation": "replace", "distance": 1, "sentence": original, "evidence": ["x"],
             "sides": [{"role": "original", "source": original, "translation": "老渔夫卖了鱼。"},
                       {"role": "mutant", "source": mutant, "translation": "某某。"}]}
    refs = {original: "老渔夫卖了鱼。", mutant: "正确的译文。"}
    stats = oracle_review([issue], refs, tmp_path / "review")
    assert stats["with_error"] == 1
    with CorrectionStore(tmp_path / "review", [issue]) as store:
        assert store.judgment(issue["id"])["wrong"] == ["mutant"]
        (c,) = store.corrections()
    assert (c["source"], c["correction"]) == (mutant, "正确的译文。")
    with pytest.raises(ReviewPending, match="wrong_1, wrong_2"):
        file_review([issue], tmp_path / "sheet")


def test_figures_by_relation_count_issues_errors_and_precision():
    from repair.stats import by_relation

    rti = upgrade(OLD_RECORD)
    rep = {"id": "r1", "relation": "replace", "distance": 2, "sentence": "a", "evidence": [],
           "sides": [{"role": "original", "source": "a cat sat .", "translation": "猫坐着。"},
                     {"role": "mutant", "source": "a dog sat .", "translation": "狗走了。"}]}
    judgments = {"r1": {"wrong": ["mutant"]}, rti["id"]: {"wrong": []}}
    refs = {"a cat sat .": "猫坐着。", "a dog sat .": "狗坐着。", "the clever boy": "聪明的男孩"}
    figures = by_relation([rti, rep], judgments, refs)
    assert figures["replace"] == {"issues": 1, "erroneous_translations": 1, "judged": 1, "with_error": 1,
                                  "precision": 1.0}
    assert figures["rti"]["precision"] == 0.0 and figures["rti"]["erroneous_translations"] == 0
    assert by_relation([rep], {}, None)["replace"]["precision"] is None


def test_an_adjective_is_replaced_only_by_one_seen_with_its_noun(tmp_path):
    leaves = tagged_leaves(FISH)
    words = [w for _, w, _ in leaves]
    heads = {words[i]: words[h] for i, (_, _, h) in enumerate(leaves) if h is not None}
    assert heads == {"old": "fisherman", "fresh": "fish", "busy": "market"}
    monkey = Parsed("m:1", "The monkey was hungry .",
                    "(ROOT (S (NP (DT The) (NN monkey)) (VP (VBD was) (ADJP (JJ hungry))) (. .)))")
    corpus = tmp_path / "corpus.en"
    # "busy" beside "the" and before "market"; "young" beside "the" only; "red" never
    corpus.write_text("the busy old market\nthe young one\n", encoding="utf-8")
    lexicon = tmp_path / "lexicon.jsonl"
    lexicon.write_text('{"tag": "JJ", "words": ["old", "busy", "young", "red", "hungry", "sad"]}\n', encoding="utf-8")
    relation = ReplaceRelation(lexicon=str(lexicon), corpus=str(corpus), per_word=5)
    cases = relation.cases([Parsed("f:1", FISH_TEXT, FISH), monkey])
    # "the busy market" -> "the old market": "the old" and "old ... market" seen; "The old fisherman" -> "busy" is
    # not (no "busy ... fisherman"), nor "fresh" -> anything (the lexicon lacks it)
    assert {tuple(c.info["replaced"]) for c in cases} == {("busy", "old")}
    assert relation.counts()["filtered"]["predicative"] == 1  # "was hungry" is left alone
