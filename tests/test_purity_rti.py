"""RTI extraction and pairing on hand-written trees: the contract's rules one by one."""

import pytest

from repair.purity import english_stopwords, extract, rti_pairs
from repair.purity.rti import TreeSyntaxError, find_in_sentence, parse_tree, phrase_text, split_trees

from conftest import SHARED_DATA as SHARED

FIG3 = ("(ROOT (S (NP (NNP Emma) (NNP Stone)) (VP (VBD starred) (PP (IN as) (NP (NP (NNP Holmes)) "
        "(PP (IN in) (NP (NP (DT a) (NN movie)) (VP (VBN based) (PP (IN on) (NP (NNP Bad) (NNP Blood))))))))) "
        "(. .)))")
FIG3_SENTENCE = "Emma Stone starred as Holmes in a movie based on Bad Blood."


def test_fig3_gives_exactly_the_three_pairs():
    assert rti_pairs(FIG3) == [
        (FIG3_SENTENCE, "Holmes in a movie based on Bad Blood"),
        (FIG3_SENTENCE, "a movie based on Bad Blood"),
        ("Holmes in a movie based on Bad Blood", "a movie based on Bad Blood"),
    ]


def test_the_given_sentence_is_the_container_text():
    sentence = "Emma Stone starred as Holmes in a movie based on Bad Blood."
    pairs = rti_pairs(FIG3, sentence)
    assert [c for c, _ in pairs] == [sentence, sentence, "Holmes in a movie based on Bad Blood"]


def test_function_tags_indices_traces_and_unlabeled_outer_bracket():
    tree = """( (S (NP-SBJ-1 (DT The) (JJ new) (NN committee) (NN chairman))
         (VP (VBD was)
           (VP (VBN elected)
             (NP=2 (-NONE- *-1))
             (PP-TMP (IN after) (NP-3 (JJ long) (JJ bitter) (NNS debates)))))
         (. .)) )"""
    found = extract(tree)
    assert found.sentence == "The new committee chairman was elected after long bitter debates."
    assert found.rtis == ["The new committee chairman", "long bitter debates"]
    assert found.pairs == [(found.sentence, "The new committee chairman"),
                           (found.sentence, "long bitter debates")]


def test_a_trace_only_constituent_is_dropped_and_words_exclude_punctuation():
    # The NP holding only a trace vanishes; the quotes are punctuation, trimmed at both ends.
    tree = ("(ROOT (S (NP (-NONE- *T*-1)) (VP (VBD said) (NP (`` ``) (JJ big) (JJ red) (NNS dogs) ('' '')))"
            " (. .)))")
    assert rti_pairs(tree, "said big red dogs.") == [("said big red dogs.", "big red dogs")]


def test_possessive_joins_and_counts_as_stop_word():
    tree = ("(ROOT (S (NP (NP (NNP Gavin) (NNP Newsom) (POS 's)) (JJ first) (NN budget)) "
            "(VP (VBD passed)) (. .)))")
    # "Gavin Newsom 's": three words but 's is a stop word, so only two content words.
    assert extract(tree).rtis == ["Gavin Newsom's first budget"]
    assert rti_pairs(tree, "Gavin Newsom's first budget passed.") == [
        ("Gavin Newsom's first budget passed.", "Gavin Newsom's first budget")]


def test_brackets_unescaped_and_trailing_apostrophe_dropped():
    assert phrase_text(["Apple", "-LRB-", "AAPL", "-RRB-", "stock", "price"]) == "Apple (AAPL) stock price"
    assert phrase_text(["-LRB-", "the", "big", "three", "-RRB-"]) == "the big three"
    assert phrase_text(["the", "three", "players'"]) == "the three players"
    # A bracket at an end stays when its partner is inside: never half a pair.
    assert phrase_text(["€", "4.34", "billion", "-LRB-", "$", "4.9", "billion", "-RRB-"]) == "€4.34 billion ($4.9 billion)"
    assert phrase_text(["-LRB-", "in", "euros", "-RRB-", "the", "price"]) == "(in euros) the price"
    # A leading currency sign stays with its amount; leaves are joined as text is written.
    assert phrase_text(["$", "4.9", "billion", ",", "-RRB-"]) == "$4.9 billion"
    assert phrase_text(["the", "boy", "'s", "dog", ",", "cat", "and", "5", "%"]) == "the boy's dog, cat and 5%"
    # Given the sentence, the phrase is spelt as the sentence spells it; a word is never cut.
    assert phrase_text(["Deutsche", "'", "s", "bank"], "Deutsche ' s bank was fined .") == "Deutsche ' s bank"
    assert phrase_text(["do", "n't", "cat"], "I don't cat") == "don't cat"
    assert find_in_sentence(["cat", ","], "a bobcat, the cat ,") == "cat ,"
    # Penn Treebank quotes match the sentence's; alone, they are written as quotes.
    assert phrase_text(["the", "``", "big", "''", "dog"], 'saw the "big" dog') == 'the "big" dog'
    assert phrase_text(["the", "``", "big", "''", "dog"]) == "the \u201cbig\u201d dog"


def test_nested_nps_every_np_ancestor_is_a_container():
    # The outer NP has 12 words: not an RTI, still a container of the RTIs inside it.
    tree = ("(ROOT (S (NP (NP (JJ chummy) (JJ bilateral) (NNS talks)) (PP (IN with) (NP (NNP Trump))) "
            "(SBAR (WHNP (WDT that)) (S (VP (VBD illustrated) (NP (DT a) (JJ budding) (JJ regional) (NN partnership) "
            "(CC and) (JJ new) (NNS hopes)))))) (VP (VBD ended)) (. .)))")
    outer = "chummy bilateral talks with Trump that illustrated a budding regional partnership and new hopes"
    sentence = outer + " ended ."
    found = extract(tree, sentence)
    assert outer not in found.rtis  # 14 words > 10
    assert found.rtis == ["chummy bilateral talks", "a budding regional partnership and new hopes"]
    assert found.pairs == [
        (sentence, "chummy bilateral talks"),
        (sentence, "a budding regional partnership and new hopes"),
        (outer, "chummy bilateral talks"),
        (outer, "a budding regional partnership and new hopes"),
    ]


def test_an_np_equal_to_the_sentence_is_the_sentence():
    tree = ("(ROOT (NP (NP (DT The) (JJ chummy) (JJ bilateral) (NNS talks)) (PP (IN with) (NP (NNP Trump))) "
            "(. .)))")
    sentence = "The chummy bilateral talks with Trump."
    pairs = rti_pairs(tree, sentence)
    # The whole NP is an RTI of the sentence; as a container it is the sentence, not a second container.
    assert pairs == [(sentence, "The chummy bilateral talks with Trump"),
                     (sentence, "The chummy bilateral talks")]


def test_pairs_are_unique_and_never_pair_a_text_with_itself():
    # The same RTI twice, and an NP whose only other child is punctuation (same text as its RTI child).
    tree = ("(ROOT (S (NP (NP (JJ fresh) (JJ green) (NNS apples)) (, ,)) (VP (VBD beat) "
            "(NP (JJ fresh) (JJ green) (NNS apples))) (. .)))")
    sentence = "fresh green apples, beat fresh green apples."
    assert rti_pairs(tree, sentence) == [(sentence, "fresh green apples")]


def test_word_bounds_are_configurable():
    tree = "(ROOT (S (NP (DT the) (JJ big) (JJ red) (NN dog)) (VP (VBD barked))))"
    assert extract(tree).rtis == ["the big red dog"]
    assert extract(tree, max_words=3).rtis == []
    assert extract(tree, min_content_words=4).rtis == []
    assert extract(tree, stopwords=frozenset({"big", "red"})).rtis == []  # content words: the, dog


def test_any_label_set_and_flat_np_nodes():
    # The shape of the spaCy backend's trees: escaped brackets, NP nodes over tagged leaves.
    tree = ("(ROOT (S (NP (NNP Apple) (-LRB- -LRB-) (NNP AAPL) (-RRB- -RRB-) (NN stock) (NN price)) "
            "(VBD rose) (. .)))")
    assert extract(tree).rtis == ["Apple (AAPL) stock price"]
    assert extract(tree).sentence == "Apple (AAPL) stock price rose."


def test_malformed_trees_raise_with_a_position():
    for bad in ["(S (NP a b)", "(S (NP a b)))", "S (NP a)", "(S ()) ", "(S a) (S b)"]:
        with pytest.raises(TreeSyntaxError):
            parse_tree(bad)


def test_split_trees_spans_lines_and_names_the_bad_line():
    lines = ["(ROOT (S", "  (NP a b))", ")", "", "(S (NP c))"]
    assert split_trees(lines) == [(1, "(ROOT (S\n  (NP a b))\n)"), (5, "(S (NP c))")]
    with pytest.raises(TreeSyntaxError) as e:
        split_trees(["(S (NP a))", "stray words", "(S b)"])
    assert e.value.offset == 2
    with pytest.raises(TreeSyntaxError) as e:
        split_trees(["(S (NP a))", "", "(S (NP b)"])
    assert e.value.offset == 3


def test_stopwords_are_nltks_179_english_words():
    words = english_stopwords()
    assert len(words) == 179
    assert {"the", "s", "t", "don't", "ourselves"} <= words


@pytest.mark.skipif(not (SHARED / "nltk-stopwords" / "english.txt").is_file(),
                    reason="../shared/data/nltk-stopwords/english.txt is absent")
def test_stopwords_match_the_reference_list():
    reference = (SHARED / "nltk-stopwords" / "english.txt").read_text(encoding="utf-8").split()
    assert english_stopwords() == frozenset(reference)


def test_stopwords_can_come_from_a_file(tmp_path):
    from repair.purity.rti import load_stopwords

    path = tmp_path / "stop.txt"
    path.write_text("The\nbig\n\nred\n", encoding="utf-8")
    words = load_stopwords(str(path))
    assert words == {"the", "big", "red"}
    tree = "(ROOT (S (NP (DT the) (JJ big) (JJ red) (NN dog) (NN house)) (VP (VBD stood))))"
    assert extract(tree).rtis == ["the big red dog house"]
    assert extract(tree, stopwords=words).rtis == []
