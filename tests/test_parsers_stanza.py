"""The stanza backend for real: a tiny constituency model built with stanza's own classes,
loaded through StanzaParser as a downloaded model would be; and the missing-model message."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from repair.errors import UserError
from repair.purity.parsers.stanza import StanzaParser

# Hand-written trees: enough labels and words for stanza to build its transition system.
TINY_TREEBANK = """
(ROOT (S (NP (DT The) (NN president)) (VP (VBD held) (NP (NP (JJ chummy) (JJ bilateral) (NNS talks))
  (PP (IN with) (NP (DT the) (JJ prime) (NN minister))))) (. .)))
(ROOT (S (NP (DT A) (JJ small) (NN dog)) (VP (VBD saw) (NP (DT the) (NN cat))) (. .)))
(ROOT (S (NP (PRP She)) (VP (VBD left) (PP (IN for) (NP (NNP Paris)))) (. .)))
"""


def build_tiny_model(folder) -> tuple[str, str]:
    """A few-kilobyte stanza constituency model and its word-vector pretrain, saved in folder."""
    from stanza.models import constituency_parser
    from stanza.models.common.foundation_cache import FoundationCache
    from stanza.models.common.pretrain import Pretrain
    from stanza.models.common.utils import set_random_seed
    from stanza.models.constituency import parser_training, tree_reader

    trees = tree_reader.read_trees(TINY_TREEBANK)
    vocabulary = sorted({leaf for tree in trees for leaf in tree.leaf_labels()} | {"<unk>"})
    rng = random.Random(7)
    vectors = folder / "vectors.txt"
    with open(vectors, "w", encoding="utf-8") as f:
        f.write(f"{len(vocabulary)} 4\n")
        for word in vocabulary:
            f.write(word + " " + " ".join(f"{rng.uniform(-1, 1):.3f}" for _ in range(4)) + "\n")
    pretrain_path = str(folder / "pretrain.pt")
    Pretrain(pretrain_path, str(vectors)).load()  # reads the text file, writes pretrain.pt

    set_random_seed(7)
    args = constituency_parser.parse_args([
        "--wordvec_pretrain_file", pretrain_path, "--pattn_num_layers", "0", "--lattn_d_proj", "0",
        "--hidden_size", "8", "--delta_embedding_dim", "4", "--tag_embedding_dim", "4",
    ])
    trainer, *_ = parser_training.build_trainer(args, trees, trees[-1:], [], FoundationCache(), None)
    model_path = str(folder / "constituency.pt")
    trainer.save(model_path)
    return model_path, pretrain_path


def read_tree(tree: str):
    """(label, children) nodes from a bracketed tree; leaves are plain strings."""
    tokens = tree.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def node():
        nonlocal pos
        assert tokens[pos] == "(", f"expected ( at token {pos} of {tree}"
        label, pos = tokens[pos + 1], pos + 2
        children = []
        while tokens[pos] != ")":
            if tokens[pos] == "(":
                children.append(node())
            else:
                children.append(tokens[pos])
                pos += 1
        pos += 1
        return label, children

    root = node()
    assert pos == len(tokens), f"text after the tree's end: {tree}"
    return root


def preterminals(n) -> list[tuple[str, str]]:
    """(tag, word) for every preterminal, in order; asserts each word sits under exactly one tag."""
    label, children = n
    if len(children) == 1 and isinstance(children[0], str):
        return [(label, children[0])]
    assert all(not isinstance(c, str) for c in children), f"a bare word beside constituents in {n}"
    return [p for c in children for p in preterminals(c)]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("stanza-tiny"))


@pytest.fixture(scope="module")
def tiny_parser(tiny_model, tmp_path_factory):
    model_path, pretrain_path = tiny_model
    # An empty model_dir: nothing but the given files can be used.
    return StanzaParser(model_dir=str(tmp_path_factory.mktemp("no-resources")), pretagged=True,
                        constituency_model_path=model_path, constituency_pretrain_path=pretrain_path,
                        use_gpu=False)


def test_tiny_model_parses_into_well_formed_trees(tiny_parser):
    lines = ["The president held chummy bilateral talks with the prime minister.",
             "A dog (an unknown word: zyxt) saw the cat. She left.",
             ""]
    trees = tiny_parser.parse(lines)
    assert len(trees) == 3
    first = read_tree(trees[0])
    assert first[0] == "ROOT"
    words = [w for _, w in preterminals(first)]
    assert words == ["The", "president", "held", "chummy", "bilateral", "talks", "with", "the",
                     "prime", "minister", "."]
    # The tags are spaCy's, passed to stanza: a sanity check that pretagging reached the parser.
    assert dict((w, t) for t, w in preterminals(first))["talks"] == "NNS"
    second = read_tree(trees[1])
    assert second[0] == "ROOT"  # two sentences on one line: still one tree
    second_words = [w for _, w in preterminals(second)]
    assert "-LRB-" in second_words and "(" not in second_words and "zyxt" in second_words
    assert trees[2] == "(ROOT)"
    assert tiny_parser.parse([]) == []


def test_missing_models_give_one_clear_message(tmp_path):
    with pytest.raises(UserError) as e:
        StanzaParser(model_dir=str(tmp_path))
    assert "stanza.download('en', processors='tokenize,pos,constituency'" in str(e.value)
    assert "parser.model_dir" in str(e.value) and str(tmp_path) in str(e.value)


def test_missing_model_file_names_it(tmp_path):
    with pytest.raises(UserError, match="constituency.pt"):
        StanzaParser(pretagged=True, constituency_model_path=str(tmp_path / "constituency.pt"),
                     constituency_pretrain_path=str(tmp_path / "pretrain.pt"))


def test_a_file_that_is_no_model_is_a_user_error(tiny_model, tmp_path):
    not_a_model = tmp_path / "constituency.pt"
    not_a_model.write_text("these are not weights\n", encoding="utf-8")
    with pytest.raises(UserError, match="could not load"):
        StanzaParser(model_dir=str(tmp_path), pretagged=True, constituency_model_path=str(not_a_model),
                     constituency_pretrain_path=tiny_model[1])


def test_missing_models_end_without_a_traceback(tmp_path):
    """What a user sees at the command line: `error: ...`, exit status 2, no traceback."""
    script = ("from repair.errors import exit_on_user_error\n"
              "from repair.purity.parsers.stanza import StanzaParser\n"
              f"exit_on_user_error(lambda: StanzaParser(model_dir={str(tmp_path)!r}))()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("error: stanza models for 'en'")
    assert "Traceback" not in done.stderr
