"""A scoped edit (repair.purity.scoped): which inputs the fine-tuned model translates, and the routing."""

import json

import pytest

from repair.errors import UserError
from repair.purity.scoped import SCOPE_FILE, Scope, ScopedTranslator, extended, scope_of, source_key
from repair.purity.translators import TableTranslator

SOURCES = ("three red apples", "the old teacher")


def write_table(path, rows):
    path.write_text("".join(f"{s}\t{t}\n" for s, t in rows.items()), encoding="utf-8")
    return str(path)


def test_source_scope_is_whole_token_containment_case_and_spacing_aside():
    covers = Scope("source", SOURCES).covers()
    assert covers("She ate  THREE red apples .")
    assert covers("the old teacher")
    assert not covers("three red apple trees")  # "apples" is not a token of it
    assert not covers("the red apples , three of them")  # not as a run
    assert not covers("the bold teacher")


def test_words_scope_counts_a_share_of_the_content_words_in_any_order():
    whole = Scope("words", SOURCES, share=1.0).covers()
    assert whole("the apples were red , all three")  # every content word, in another order
    assert whole("an old teacher")  # "the" is a stop word
    assert not whole("three green apples")  # 2 of 3
    half = Scope("words", SOURCES, share=0.5).covers()
    assert half("three green apples") and not half("green pears")


def test_a_scope_refuses_what_it_cannot_mean():
    with pytest.raises(UserError, match="kind"):
        Scope("everything", SOURCES)
    with pytest.raises(UserError, match="share"):
        Scope("words", SOURCES, share=0)


def test_routing_keeps_order_and_sends_each_text_to_one_model(tmp_path):
    texts = ["three red apples", "a blue car", "the old teacher sang", "a blue car"]
    edited = TableTranslator(write_table(tmp_path / "edited.tsv", {t: f"E:{t}" for t in texts}))
    base = TableTranslator(write_table(tmp_path / "base.tsv", {t: f"B:{t}" for t in texts}))
    scoped = ScopedTranslator(edited, base, Scope("source", SOURCES))
    assert scoped.translate(texts) == ["E:three red apples", "B:a blue car", "E:the old teacher sang", "B:a blue car"]
    assert scoped.split(texts) == [True, False, True, False]
    d = scoped.describe()
    assert d["name"] == "scoped" and d["corrected_sources"] == 2 and d["fallback"]["name"] == "table"
    # nothing in scope: the fallback's translations exactly, so what was right stays right
    assert scoped.translate(["a blue car"]) == base.translate(["a blue car"])


def test_a_second_cycle_keeps_the_first_base_model_and_adds_its_corrections(tmp_path):
    first = extended(None, "words", 1.0, "/m/base.pt", ["Three red apples"])
    assert first.fallback == "/m/base.pt" and first.sources == ("three red apples",)
    second = extended(first, "words", 1.0, "/run/cycle1/finetune/checkpoint_best.pt",
                      ["the old teacher", "three red apples"])
    assert second.fallback == "/m/base.pt"  # never the first fine-tuned model
    assert second.sources == ("three red apples", "the old teacher")
    (tmp_path / SCOPE_FILE).write_text(json.dumps(second.as_json()))
    with pytest.raises(UserError, match="base model that translates outside the scope, /m/base.pt, is missing"):
        scope_of(tmp_path / "checkpoint_best.pt")
    (tmp_path / "base.pt").write_bytes(b"")
    moved = extended(second, "words", 1.0, "", [])
    moved = Scope(moved.kind, moved.sources, moved.share, str(tmp_path / "base.pt"))
    (tmp_path / SCOPE_FILE).write_text(json.dumps(moved.as_json()))
    assert scope_of(tmp_path / "checkpoint_best.pt") == moved
    assert scope_of(tmp_path / "elsewhere" / "checkpoint_best.pt") is None
    (tmp_path / SCOPE_FILE).write_text(json.dumps({"kind": "words"}))
    with pytest.raises(UserError, match="not a scope file"):
        scope_of(tmp_path / "checkpoint_best.pt")
    (tmp_path / SCOPE_FILE).write_text(json.dumps({**moved.as_json(), "kind": "everything"}))
    with pytest.raises(UserError, match=f"{SCOPE_FILE}: scope kind 'everything'"):
        scope_of(tmp_path / "checkpoint_best.pt")
    assert source_key("  A  b ") == "a b"


def test_terms_scope_covers_its_sources_and_the_taught_words_in_either_number(tmp_path):
    scope = extended(None, "terms", 1.0, "/m/base.pt", ["the red otter"], ["Otter"])
    covers = scope.covers()
    assert covers("Two otters swam .") and covers("an otter") and covers("I saw the red otter .")
    assert not covers("a red cat") and not covers("the otterhound")
    again = extended(scope, "terms", 1.0, "/x.pt", ["a violin"], ["violin"])
    assert again.words == ("otter", "violin") and again.fallback == "/m/base.pt"
    (tmp_path / "base.pt").write_bytes(b"")
    written = Scope(again.kind, again.sources, again.share, str(tmp_path / "base.pt"), again.words)
    (tmp_path / SCOPE_FILE).write_text(json.dumps(written.as_json()))
    assert scope_of(tmp_path / "checkpoint_best.pt") == written


def test_taught_words_are_seldom_seen_words_whose_own_translation_is_a_corrected_term(tmp_path):
    from repair.stages.finetune import taught_words

    corrections = [{"source": "the red otter", "translation": "红色的猫", "correction": "红色的水獭"},
                   {"source": "a tall sailor", "translation": "一名高大的水手", "correction": "一名高大的水手"}]
    edited = TableTranslator(write_table(tmp_path / "edited.tsv", {"red": "红色", "otter": "水獭", "tall": "高大",
                                                                   "sailor": "水手"}))
    assert taught_words(corrections, ["的"], edited) == ["otter"]  # "red" is no term: the translation had it
    # only words the model seldom saw, a final s aside
    assert taught_words(corrections, ["的"], edited, {"otter": 3}, rare=10) == ["otter"]
    assert taught_words(corrections, ["的"], edited, {"otter": 30}, rare=10) == []
    # an answer that merely holds a term among other words is not a taught word
    chatty = TableTranslator(write_table(tmp_path / "chatty.tsv", {"red": "红色", "otter": "红色的猫和狗水獭",
                                                                   "tall": "高大", "sailor": "水手"}))
    assert taught_words(corrections, ["的"], chatty) == []


def test_a_rarity_that_is_not_a_count_is_a_user_error():
    from repair.stages.finetune import settings_from_config

    ft = {"lr": 1e-4, "patience": 1, "max_epoch": 1, "repeat": 1, "replay": 0, "scope": "terms"}
    assert settings_from_config(ft, seed=1).scope_rare == 100
    assert settings_from_config({**ft, "scope_rare": 0}, seed=1).scope_rare == 0
    for bad in (-1, "many", 2.5):
        with pytest.raises(UserError, match="finetune.scope_rare"):
            settings_from_config({**ft, "scope_rare": bad}, seed=1)
