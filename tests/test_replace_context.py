"""The replacement relation on hand-made cases: words judged in their phrase, ignored replacements flagged,
`skip_latin` over the phrases, and the natural-candidate filters (vectors and tags, the governing phrase, the
language model) on a small corpus."""

import json

import pytest

from repair.fileio import read_jsonl
from repair.purity import run_purity
from repair.purity.relations import Case, Parsed, ReplaceRelation
from repair.purity.relations.natural import NGramLM, words_of
from repair.purity.relations.replace import context_span, leaf_offsets, np_ranges, tagged_leaves, written_words
from repair.purity.translators import Translator

OLD_MAN = "(ROOT (S (NP (DT The) (JJ old) (NN man)) (VP (VBD sold) (NP (NN fish))) (. .)))"
OLD_MAN_TEXT = "The old man sold fish."
BIG_BOAT = "(ROOT (S (NP (DT The) (JJ big) (NN boat)) (VP (VBD sank)) (. .)))"
BIG_BOAT_TEXT = "The big boat sank."

# word by word; "old" is 老 before "man" (a person) and 旧 elsewhere (alone too): the in-context form differs
WORDS = {"the": "", "young": "年轻", "man": "人", "sold": "卖了", "fish": "鱼", ".": "。", "big": "大",
         "large": "大", "boat": "船", "sank": "沉了"}


class Synthetic(Translator):
    """Word by word through WORDS. `stale`: in a text of more than three words, "young" is translated as
    "old" would be (the replacement ignored). `latin`: in a text of at most three words, "young" is left in
    English (an untranslated word in the phrase only)."""

    name = "synthetic"

    def __init__(self, stale: bool = False, latin: bool = False):
        self.stale, self.latin, self.calls = stale, latin, []

    def translate(self, texts):
        self.calls.append(list(texts))
        return [self._one(t) for t in texts]

    def _one(self, text):
        words = text.replace(".", " .").lower().split()
        out = []
        for k, w in enumerate(words):
            if w == "young" and self.stale and len(words) > 3:
                w = "old"
            if w == "young" and self.latin and len(words) <= 3:
                out.append("young")
            elif w == "old":
                out.append("老" if k + 1 < len(words) and words[k + 1] == "man" else "旧")
            else:
                out.append(WORDS.get(w, w))
        return "".join(out)


def run(tmp_path, translator, sentences=((OLD_MAN_TEXT, OLD_MAN),), words=("old", "young"), **options):
    lexicon = tmp_path / "lexicon.jsonl"
    lexicon.write_text(json.dumps({"tag": "JJ", "words": list(words)}) + "\n", encoding="utf-8")
    summary = run_purity([s for s, _ in sentences], None, translator, tmp_path / "run", trees=[t for _, t in sentences],
                         relations=["replace"],
                         relation_options={"replace": {"lexicon": str(lexicon), "min_context": 0, **options}})
    return summary, read_jsonl(tmp_path / "run" / "issues.jsonl")


def test_a_replacement_translated_consistently_in_context_is_no_issue(tmp_path):
    translator = Synthetic()
    summary, issues = run(tmp_path, translator)
    assert summary["by_relation"]["replace"]["cases"] == 1 and issues == []
    (pair,) = read_jsonl(tmp_path / "run" / "pairs.jsonl")
    assert pair["sides"][1]["source"] == "The young man sold fish."
    # the phrases went through the same batch, each text once
    (batch,) = translator.calls
    assert sorted(batch) == sorted(["The old man sold fish.", "The young man sold fish.", "The old man", "The young man",
                                    "The old man.", "The young man."])  # also closed as the sentence is
    assert summary["by_relation"]["replace"]["in_context"] == {"noun phrase": 1}
    # the same case judged by the bare words ("old" alone is 旧) finds a change that is not one: 老
    relation = ReplaceRelation()
    o, m = OLD_MAN_TEXT, "The young man sold fish."
    translate = Synthetic().translate
    bare = Case("replace", o, (("original", o), ("mutant", m)), (o, m, "old", "young"))
    assert relation.check(bare, dict(zip(bare.texts, translate(list(bare.texts))))).evidence == ("老",)


def test_the_phrase_is_the_noun_phrase_else_the_neighbours_else_none():
    names = [w for _, w, _ in tagged_leaves(OLD_MAN)]
    nps = np_ranges(OLD_MAN)
    assert context_span(1, names, nps, 5) == ("noun phrase", 0, 3)  # "The old man"
    assert context_span(4, names, nps, 5) == ("neighbours", 3, 5)   # "fish": a one-word NP -> "sold fish"
    assert context_span(1, names, nps, 2) == ("neighbours", 0, 2)   # NP too long -> "The old"
    assert leaf_offsets(names, OLD_MAN_TEXT) == [(0, 3), (4, 7), (8, 11), (12, 16), (17, 21), (21, 22)]
    two = "(ROOT (S (NP (NNS Birds)) (VP (VBP sing)) (. .)))"
    assert context_span(0, [w for _, w, _ in tagged_leaves(two)], np_ranges(two), 5) is None  # the whole sentence
    # a span never starts with a clitic: "'s fearless" is no phrase (a translator reads it as one word), and
    # with the word it belongs to the span would be the whole sentence
    clitic = "(ROOT (S (NP (NNP Tom)) (POS 's) (NP (NN fearless)) (. .)))"
    assert context_span(2, [w for _, w, _ in tagged_leaves(clitic)], np_ranges(clitic), 5) is None
    owner = "(ROOT (S (NP (PRP I)) (VP (VBD liked) (NP (NP (NNP Tom) (POS 's)) (NN car))) (. .)))"
    assert context_span(4, [w for _, w, _ in tagged_leaves(owner)], np_ranges(owner), 5) == ("noun phrase", 2, 5)



def test_a_phrase_holds_whole_written_words_and_a_question_s_wh_noun_phrase():
    # "your mother" of "your mother-in-law" is another text to a translator: the phrase takes the whole word
    law = "(ROOT (S (VBZ Is) (NP (NP (PRP$ your) (NN mother)) (HYPH -) (IN in) (HYPH -) (NP (NN law))) (. ?)))"
    text = "Is your mother-in-law?"
    names = [w for _, w, _ in tagged_leaves(law)]
    written = written_words(leaf_offsets(names, text))
    assert written == [0, 1, 2, 2, 2, 2, 2, 2]  # "mother-in-law?" is one word as the sentence writes it
    assert context_span(2, names, np_ranges(law), 5) == ("noun phrase", 1, 3)           # leaves alone: "your mother"
    assert context_span(2, names, np_ranges(law), 5, written) == ("noun phrase", 1, 7)  # "your mother-in-law"
    # a phrase of one written word ("T-shirts") is a word alone to a translator: the neighbours are taken
    shirts = "(ROOT (S (NP (PRP She)) (VBD sold) (NP (NN T) (HYPH -) (NNS shirts)) (NP (NN today)) (. .)))"
    names = [w for _, w, _ in tagged_leaves(shirts)]
    written = written_words(leaf_offsets(names, "She sold T-shirts today."))
    assert context_span(4, names, np_ranges(shirts), 5) == ("noun phrase", 2, 5)
    assert context_span(4, names, np_ranges(shirts), 5, written) == ("neighbours", 2, 6)  # "T-shirts today"
    # a Penn tree's question: "How many brothers" is a WHNP, judged whole (its measure word is in it)
    how = ("(ROOT (SBARQ (WHNP (WHADJP (WRB How) (JJ many)) (NNS brothers)) (SQ (VBP do) (NP (PRP you)) "
           "(VP (VB have))) (. ?)))")
    assert context_span(2, [w for _, w, _ in tagged_leaves(how)], np_ranges(how), 5) == ("noun phrase", 0, 3)

def test_an_ignored_replacement_is_flagged(tmp_path):
    summary, issues = run(tmp_path, Synthetic(stale=True))
    (issue,) = issues
    assert [s["translation"] for s in issue["sides"]] == ["老人卖了鱼。", "老人卖了鱼。"]
    assert issue["evidence"] == ["replacement ignored", "老", "年", "轻"] and issue["distance"] == 3
    assert issue["in_context"] == "noun phrase" and issue["phrases"] == ["The old man", "The young man"]
    # the sample to judge shows the pair, both translations and the phrases it was judged by
    from repair.purity.sample import sample

    text = sample(tmp_path / "run", 5, 5, seed=1)
    assert "Cases: 1 of 1 (seed 1)" in text and "Issues: 1 of 1 (seed 1)" in text
    # (the phrases closed as the sentence is come after: there the translator ignores "young" too, but the
    # original's translation holds both contexts alike, and on a tie the phrase as it stands judges)
    assert ("noun phrase: The old man = 老人; The young man = 年轻人; The old man. = 老人。; The young man. = 老人。 "
            "| 3: replacement ignored 老 年 轻 |") in text


def test_synonyms_translated_alike_are_no_issue(tmp_path):
    summary, issues = run(tmp_path, Synthetic(), sentences=((BIG_BOAT_TEXT, BIG_BOAT),), words=("big", "large"))
    assert summary["by_relation"]["replace"]["cases"] == 1 and issues == []


def test_skip_latin_covers_the_phrases(tmp_path):
    summary, issues = run(tmp_path, Synthetic(latin=True))
    assert summary["by_relation"]["replace"]["skipped"] == 1 and issues == []


def test_the_language_model_prefers_what_the_corpus_says():
    lines = [words_of(t) for t in ["the cat sat on the mat .", "the dog sat on the mat .", "a cat sat here ."] * 5]
    lm = NGramLM(lines)
    same = words_of("the dog sat on the mat .")
    odd = words_of("the on sat on the mat .")
    assert lm.drop(same, words_of("the cat sat on the mat ."), 1) < 0.5
    assert lm.drop(same, odd, 1) > 1.5
    assert abs(sum(lm.prob(w, ("the", "cat")) for w in lm.uni) + lm.prob("zebra", ("the", "cat")) - 1) < 0.05


CORPUS = [f"{who} {verb} the {thing} ." for who in ("i", "you", "we", "they", "tom", "mary")
          for verb in ("wash", "paint", "sell", "buy", "like")
          for thing in ("car", "house", "boat", "bike")] + \
         [f"the {thing} is {adj} ." for thing in ("car", "house", "boat", "bike") for adj in ("red", "new", "big")] * 3 + \
         [f"{who} {verb} quickly ." for who in ("i", "you", "we", "they") for verb in ("run", "swim", "eat")] * 2


def test_vectors_tags_governor_and_lm_give_natural_candidates(tmp_path):
    pytest.importorskip("gensim")
    corpus = tmp_path / "train.en"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    tree = "(ROOT (S (NP (PRP We)) (VP (VBP wash) (NP (DT the) (NN car))) (. .)))"
    relation = ReplaceRelation(corpus=str(corpus), cache_dir=str(tmp_path / "cache"), per_word=4, neighbours=10)
    assert relation.source == "vectors"
    cases = relation.cases([Parsed("t:1", "We wash the car.", tree)])
    mutants = {c.sides[1][1] for c in cases}
    counts = relation.counts()
    # every noun the corpus washes can replace "car"; nothing else (no verb, no adjective) does
    assert mutants and mutants <= {"We wash the house.", "We wash the boat.", "We wash the bike."}
    assert counts["considered"] == 10 and counts["filtered"]["pos"] > 0
    assert counts["mutants"] == len(cases) and all(c.info["in_context"] == "noun phrase" for c in cases)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir())[0].endswith(".tags.json")
    # the governing phrase must be seen: "wash the ..." with a noun the corpus never washes is left out
    unseen = tmp_path / "unseen.en"
    unseen.write_text("\n".join(l for l in CORPUS if not l.startswith(("i wash the boat", "we wash the boat",
                                                                         "you wash the boat", "they wash the boat",
                                                                         "tom wash the boat", "mary wash the boat")))
                      + "\n", encoding="utf-8")
    strict = ReplaceRelation(corpus=str(unseen), cache_dir=str(tmp_path / "cache"), per_word=4, neighbours=10)
    assert "We wash the boat." not in {c.sides[1][1] for c in strict.cases([Parsed("t:1", "We wash the car.", tree)])}
    assert strict.counts()["filtered"]["governor"] > 0
