"""The stanza backend for real: tiny tokenizer, tagger and constituency models built with
stanza's own trainers (tests/stanza_tiny.py), laid out as stanza.download lays out real ones and
loaded through StanzaParser; and the messages for missing or broken models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from repair.errors import UserError
from repair.purity.parsers import make_parser
from helpers import read_tree
from repair.purity.parsers.stanza import StanzaParser
from stanza_tiny import PACKAGE, build_model_dir

CONF_PARSER = Path(__file__).resolve().parents[1] / "conf" / "parser"


def preterminals(n) -> list[tuple[str, str]]:
    """(tag, word) for every preterminal, in order; asserts each word sits under exactly one tag."""
    label, children = n
    if len(children) == 1 and isinstance(children[0], str):
        return [(label, children[0])]
    assert all(not isinstance(c, str) for c in children), f"a bare word beside constituents in {n}"
    return [p for c in children for p in preterminals(c)]


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny LSTMs run ~50x slower when torch's threads compete with other work on 2 cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    return build_model_dir(tmp_path_factory.mktemp("stanza-models"), tmp_path_factory.mktemp("stanza-work"))


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir):
    """The constituency model and its pretrain as two files."""
    return (str(tiny_model_dir / "en" / "constituency" / f"{PACKAGE}.pt"),
            str(tiny_model_dir / "en" / "pretrain" / f"{PACKAGE}.pt"))


def assert_one_well_formed_tree_per_line(trees, lines):
    assert len(trees) == len(lines)
    for tree, line in zip(trees, lines):
        if not line.strip():
            assert tree == "(ROOT)"
            continue
        root = read_tree(tree)
        assert root[0] == "ROOT"
        words = [w for _, w in preterminals(root)]
        # Every character of the line, in order, and nothing else (brackets escaped).
        escaped = "".join(line.split()).replace("(", "-LRB-").replace(")", "-RRB-")
        assert "".join(words).replace("_", "") == escaped


LINES = ["The president held chummy bilateral talks with the prime minister.",
         "A dog (an unknown word: zyxt) saw the cat. She left.",
         ""]


def test_downloaded_layout_parses_through_stanzas_own_pipeline(tiny_model_dir):
    """model_dir laid out like stanza.download's: stanza tokenizes, tags and parses."""
    cfg = OmegaConf.load(CONF_PARSER / "stanza.yaml")  # what `parser=stanza` composes
    cfg.model_dir, cfg.use_gpu = str(tiny_model_dir), False
    parser = make_parser(OmegaConf.to_container(cfg))
    assert isinstance(parser, StanzaParser) and not parser.pretagged
    trees = parser.parse(LINES)
    assert_one_well_formed_tree_per_line(trees, LINES)
    assert parser.parse([]) == []


def test_pretagged_with_model_files(tiny_model, tmp_path):
    """spaCy tokenizes and tags; stanza parses with the two given files and no model_dir."""
    model_path, pretrain_path = tiny_model
    parser = StanzaParser(model_dir=str(tmp_path), pretagged=True, use_gpu=False,
                          constituency_model_path=model_path, constituency_pretrain_path=pretrain_path)
    trees = parser.parse(LINES)
    assert_one_well_formed_tree_per_line(trees, LINES)
    first = preterminals(read_tree(trees[0]))
    assert [w for _, w in first] == ["The", "president", "held", "chummy", "bilateral", "talks", "with",
                                     "the", "prime", "minister", "."]
    # spaCy's tags reach the parser: the tiny model's output keeps them as preterminals.
    assert dict((w, t) for t, w in first)["talks"] == "NNS"
    second = [w for _, w in preterminals(read_tree(trees[1]))]
    assert "-LRB-" in second and "zyxt" in second


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
