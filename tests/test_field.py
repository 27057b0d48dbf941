"""The field case on real text (repair.examples.field): the rule's words, kept out of training but a few
sentences each, held-out sentences that hold the tested sentences' field words, the files laid out for the loop."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from repair.examples.field import clusters, main, sentence_words, sha1_key, split_field
from repair.fileio import read_text_lines
from repair.heldout import heldout_split

RULE = ["--clusters", "3", "--cluster-words", "5", "--keep", "2", "--holdout", "40", "--tested", "120"]


def test_clusters_grow_from_the_seed_by_shared_sentences():
    s = [{"snow", "mountain"}, {"snow", "mountain", "cold"}, {"snow", "cold"}, {"cold"}, {"wine", "glass"},
         {"wine", "glass"}, {"wine", "bread"}, {"bread"}, {"bread"}, {"mountain"}, {"glass"}]
    # freq: snow 3, mountain 3, cold 3, wine 3, glass 3, bread 3; band 2..3 takes them all
    got = clusters(s, (2, 3), 2, 3)
    # seed: the highest share of its sentences shared with one other word: wine-glass 2/3 (ties: later word)
    assert got[0][:2] == ["wine", "glass"] and got[0][2] == "bread"
    assert got[1] == ["snow", "mountain", "cold"]
    assert clusters(s, (4, 9), 2, 3) == []  # no word in the band
    assert sentence_words("Tom's cat drank the orange juice.", frozenset({"the"})) == {"drank", "orange", "juice"}


@pytest.fixture(scope="module")
def field(tmp_path_factory):
    from conftest import SHARED_DATA

    tatoeba = SHARED_DATA / "tatoeba-cmn-eng" / "cmn.txt"
    if not tatoeba.is_file():
        pytest.skip(f"{tatoeba} is absent (real data for tests lives beside the project)")
    out = tmp_path_factory.mktemp("field")
    main([str(out), "--tatoeba", str(tatoeba), "--no-model", *RULE])
    return out, tatoeba


def test_field_words_are_kept_out_of_training_but_a_few_sentences_each(field):
    from spacy.lang.en.stop_words import STOP_WORDS

    from repair.bench.translate import tatoeba_pairs

    out, tatoeba = field
    info = json.loads((out / "field" / "field.json").read_text(encoding="utf-8"))
    words = [w for c in info["clusters"] for w in c]
    assert len(words) == 15 and len(set(words)) == 15
    stop = frozenset(STOP_WORDS)
    everything = list(dict.fromkeys(en for en, _ in tatoeba_pairs(tatoeba)))
    freq = Counter(w for en in everything for w in sentence_words(en, stop))
    assert all(15 <= freq[w] <= 80 for w in words)  # the default band
    trained = [en for split in ("train", "valid", "test") for en in read_text_lines(out / "corpus" / f"{split}.en")]
    seen = Counter(w for en in set(trained) for w in sentence_words(en, stop) & set(words))
    kept = info["kept_in_training"]
    assert {w: seen[w] for w in words} == {w: len(kept[w]) for w in words}  # exactly the kept ones
    assert sum(len(v) == 2 for v in kept.values()) >= 13
    field_en = set(read_text_lines(out / "field" / "purity.en")) | set(read_text_lines(out / "data" / "test.en"))
    assert not field_en & set(trained)
    assert all(sentence_words(en, stop) & set(words) for en in field_en)
    # every Tatoeba sentence holding a field word is a field sentence or a kept one
    held = {en for en in everything if sentence_words(en, stop) & set(words)}
    assert held == field_en | {en for v in kept.values() for en in v}


def test_held_out_sentences_are_the_loops_and_hold_the_tested_sentences_field_words(field):
    from spacy.lang.en.stop_words import STOP_WORDS

    out, tatoeba = field
    stop = frozenset(STOP_WORDS)
    words = {w for c in json.loads((out / "field" / "field.json").read_text(encoding="utf-8"))["clusters"] for w in c}
    purity = read_text_lines(out / "field" / "purity.en")
    heldout = read_text_lines(out / "field" / "heldout.en")
    assert len(heldout) == 40 and len(purity) == 40 + 120
    idx, rest = heldout_split(purity, 40)
    assert [purity[i] for i in idx] == heldout  # what purity.holdout=40 holds out
    assert max(map(sha1_key, heldout)) < min(sha1_key(purity[i]) for i in rest)
    in_heldout = set().union(*(sentence_words(s, stop) & words for s in heldout))
    assert all(sentence_words(purity[i], stop) & words <= in_heldout for i in rest)
    from repair.bench.translate import tatoeba_pairs

    refs: dict[str, str] = {}
    for en, zh in tatoeba_pairs(tatoeba):
        refs.setdefault(en, zh)  # a sentence's first translation
    zh = read_text_lines(out / "field" / "purity.zh")
    assert zh == [refs[en] for en in purity]
    assert read_text_lines(out / "data" / "train.en") == read_text_lines(out / "corpus" / "train.en")
    assert len(read_text_lines(out / "data" / "test.en")) == len(read_text_lines(out / "data" / "test.zh")) > 0


def test_the_rule_is_deterministic_and_its_flags_shape_it():
    pairs = [(f"The snow on the mountain {i}.", f"山{i}") for i in range(20)]
    pairs += [(f"Red wine in a glass {i}.", f"酒{i}") for i in range(20)]
    pairs += [(f"Nothing here {i}.", f"无{i}") for i in range(30)]
    a = split_field(pairs, band=(15, 25), n_clusters=2, size=2, keep=3, holdout=10, tested=12)
    b = split_field(list(reversed(pairs)), band=(15, 25), n_clusters=2, size=2, keep=3, holdout=10, tested=12)
    assert a["clusters"] == b["clusters"] and a["heldout"] == b["heldout"] and a["tested"] == b["tested"]
    assert sorted(map(sorted, a["clusters"])) == [["glass", "wine"], ["mountain", "snow"]]
    assert all(len(v) == 0 for v in a["kept"].values())  # each sentence holds two field words: none kept
    assert len(a["heldout"]) == 10 and len(a["tested"]) == 12 and len(a["bleu"]) == 40 - 22
    assert len(a["train_pairs"]) == 30

