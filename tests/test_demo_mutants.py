"""The demo's word-replacement mutants and their references."""

import random

from repair.data.demo import DemoGrammar
from repair.data.demo.mutants import lexicon_groups, mutant_references


def test_mutants_change_one_word_and_their_references_one_noun_or_adjective():
    grammar = DemoGrammar(random.Random(7))
    total = 0
    for _ in range(40):
        s = grammar.sentence()
        refs = mutant_references(s)
        total += len(refs)
        for en, zh in refs.items():
            old, new = s.en_text.split(), en.split()
            assert len(old) == len(new) and en != s.en_text
            changed = [(a, b) for a, b in zip(old, new) if a != b]
            # one word, and at most the article before it ("a" <-> "an")
            assert len(changed) == 1 or (len(changed) == 2 and {changed[0][0], changed[0][1]} == {"a", "an"})
            assert abs(len(zh) - len(s.zh)) <= 3  # the same when the two words translate alike (little, small: 小)
    assert total > 200


def test_lexicon_groups_hold_words_of_one_tag():
    groups = lexicon_groups()
    assert {g["tag"] for g in groups} == {"NN", "NNS", "JJ"}
    assert all(len(g["words"]) >= 2 and len(set(g["words"])) == len(g["words"]) for g in groups)
    plural = {w for g in groups if g["tag"] == "NNS" for w in g["words"]}
    singular = {w for g in groups if g["tag"] == "NN" for w in g["words"]}
    assert plural and singular and not plural & singular
