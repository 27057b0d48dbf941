"""Every config group that chooses code is built by one rule (repair.registry): `name` picks the class, an
unknown name lists the names, an unknown key names itself and the class's keys, before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from repair.errors import UserError
from repair.purity.translators import make_translator
from repair.purity.parsers import make_parser
from repair.purity.relations import make_relations
from repair.stages import prepare, review


@pytest.mark.parametrize("build, cfg, message", [
    (make_parser, {"name": "spacy", "modle": "x"}, r"parser=spacy has no option 'modle' \(its options: model"),
    (make_parser, {"name": "berkeley"}, r"parser=berkeley: unknown parser; choose one of ptb, spacy, stanza"),
    (make_translator, {"name": "fairseq", "bean": 2}, r"translator=fairseq has no option 'bean' \(its options: .*beam"),
    (make_translator, {"name": "google"}, r"translator=google: unknown translator; choose one of table, fairseq, ctranslate2"),
    (lambda cfg: prepare.run(cfg), {"name": "demo", "dir": "d", "n_train": 5},
     r"data=demo has no option 'n_train' \(its options: dir, build, prepare, sentences, references\)"),
    (lambda cfg: prepare.run(cfg), {"name": "europarl", "dir": "d"}, r"data=europarl: unknown data; choose one of demo, wmt18, parallel"),
    (lambda cfg: review.run(Path("review"), [], cfg), {"name": "web", "prot": 1},
     r"review=web has no option 'prot' \(its options: host, port, open_browser, public, hosts\)"),
    (lambda cfg: review.run(Path("review"), [], cfg), {"name": "crowd"}, r"review=crowd: unknown review; choose one of oracle, file, web"),
    (lambda cfg: make_relations(["replace"], options={"replace": cfg}), {"per_wrd": 1},
     r"purity.replace has no option 'per_wrd' \(its options: unit, .*per_word"),
])
def test_one_rule_for_every_group(build, cfg, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=message):
        build(cfg)
    assert list(tmp_path.iterdir()) == []  # refused before any work
