"""A scoped edit (repair.edit.scoped): which inputs the fine-tuned model translates, and the routing."""

import json

import pytest

from repair.errors import UserError
from repair.edit.scoped import SCOPE_FILE, Scope, ScopedTranslator, extended, scope_of, source_key
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
    # "red" is no term: the translation had it; each taught word with the terms its own translation holds
    assert taught_words(corrections, ["的"], edited) == {"otter": ["水獭"]}
    # only words the model seldom saw, a final s aside
    assert taught_words(corrections, ["的"], edited, {"otter": 3}, rare=10) == {"otter": ["水獭"]}
    assert taught_words(corrections, ["的"], edited, {"otter": 30}, rare=10) == {}
    # an answer that merely holds a term among other words is not a taught word
    chatty = TableTranslator(write_table(tmp_path / "chatty.tsv", {"red": "红色", "otter": "红色的猫和狗水獭",
                                                                   "tall": "高大", "sailor": "水手"}))
    assert taught_words(corrections, ["的"], chatty) == {}
    # finetune.scope_words=rare: every seldom-seen word of a correction that put words in, untested, with no terms
    # (never deferred to the base model); a correction that put nothing in widens nothing
    assert taught_words(corrections, ["的"], chatty, test=False) == {"otter": [], "red": []}
    assert taught_words(corrections, ["的"], chatty, {"otter": 3, "red": 500}, rare=10, test=False) == {"otter": []}
    from repair.edit.scoped import Scope

    rare = Scope("terms", ("the red otter",), 1.0, "/m/base.pt", ("otter",), defer=True)
    assert not rare.held_right()("an otter", "一只水獭")  # no terms: never held right, so never deferred


def test_the_scopes_words_are_taught_or_rare():
    from repair.errors import UserError
    from repair.stages.finetune import settings_from_config

    ft = {"lr": 1e-3, "patience": 3, "max_epoch": 2, "repeat": 1, "replay": 0, "scope": "terms"}
    assert settings_from_config(ft, seed=1).scope_words == "taught"
    assert settings_from_config({**ft, "scope_words": "rare"}, seed=1).scope_words == "rare"
    with pytest.raises(UserError, match="finetune.scope_words='all'"):
        settings_from_config({**ft, "scope_words": "all"}, seed=1)


def test_a_rarity_that_is_not_a_count_is_a_user_error():
    from repair.stages.finetune import settings_from_config

    ft = {"lr": 1e-4, "patience": 1, "max_epoch": 1, "repeat": 1, "replay": 0, "scope": "terms"}
    assert settings_from_config(ft, seed=1).scope_rare == 100
    assert settings_from_config({**ft, "scope_rare": 0}, seed=1).scope_rare == 0
    for bad in (-1, "many", 2.5):
        with pytest.raises(UserError, match="finetune.scope_rare"):
            settings_from_config({**ft, "scope_rare": bad}, seed=1)


def test_a_words_checkpoint_translates_the_texts_that_hold_only_a_taught_word(tmp_path):
    texts = ["I saw the red otter .", "two otters swam", "a blue car", "the red otter"]
    tables = {name: TableTranslator(write_table(tmp_path / f"{name}.tsv", {t: f"{name[0].upper()}:{t}" for t in texts}))
              for name in ("edited", "base", "words")}
    (tmp_path / "base.pt").write_bytes(b"")
    scope = extended(None, "terms", 1.0, str(tmp_path / "base.pt"), ["the red otter"], ["otter"],
                     str(tmp_path / "best.pt"))
    scoped = ScopedTranslator(tables["edited"], tables["base"], scope, tables["words"])
    assert scoped.translate(texts) == ["E:I saw the red otter .", "W:two otters swam", "B:a blue car", "E:the red otter"]
    assert scoped.split(texts) == [True, True, False, True]
    assert scoped.describe()["words"]["name"] == "table"
    with pytest.raises(ValueError, match="best.pt"):
        ScopedTranslator(tables["edited"], tables["base"], scope)
    # written and read back; a missing words checkpoint is one clear error
    (tmp_path / SCOPE_FILE).write_text(json.dumps(scope.as_json()))
    with pytest.raises(UserError, match="translates the taught words, .*best.pt, is missing"):
        scope_of(tmp_path / "checkpoint_selected.pt")
    (tmp_path / "best.pt").write_bytes(b"")
    assert scope_of(tmp_path / "checkpoint_selected.pt") == scope
    # a second cycle keeps the words and names its own words checkpoint
    again = extended(scope, "terms", 1.0, "/x.pt", ["a violin"], ["violin"], "/run/c2/best.pt")
    assert again.words == ("otter", "violin") and again.words_checkpoint == "/run/c2/best.pt"
    # without one, the edited model translates the taught words as before
    plain = ScopedTranslator(tables["edited"], tables["base"], extended(None, "terms", 1.0, "/b.pt", ["the red otter"],
                                                                        ["otter"]))
    assert plain.translate(texts[:3]) == ["E:I saw the red otter .", "E:two otters swam", "B:a blue car"]


def test_the_words_epoch_is_the_lowest_validation_loss_where_it_is_not_the_selected_one(tmp_path):
    from repair.stages.finetune import settings_from_config, words_checkpoint

    ft = {"lr": 1e-4, "patience": 1, "max_epoch": 1, "repeat": 1, "replay": 0, "scope": "terms",
          "select": "corrections", "scope_words_epoch": "loss"}
    settings = settings_from_config(ft, seed=1)
    curve = [{"epoch": 1, "valid_loss": 3.0}, {"epoch": 2, "valid_loss": 2.5}, {"epoch": 3, "valid_loss": 2.7}]
    result = {"curve": curve, "selected": {"epoch": 3}}
    assert words_checkpoint(result, tmp_path, settings) is None  # no checkpoint_best.pt
    (tmp_path / "checkpoint_best.pt").write_bytes(b"")
    assert words_checkpoint(result, tmp_path, settings) == (tmp_path / "checkpoint_best.pt").resolve()
    assert words_checkpoint({**result, "selected": {"epoch": 2}}, tmp_path, settings) is None  # the same epoch
    assert words_checkpoint({"curve": curve}, tmp_path, settings) is None  # select=loss: one checkpoint
    assert words_checkpoint(result, tmp_path, settings_from_config({**ft, "scope_words_epoch": "selected"},
                                                                   seed=1)) is None
    with pytest.raises(UserError, match="finetune.scope_words_epoch"):
        settings_from_config({**ft, "scope_words_epoch": "best"}, seed=1)


def test_defer_keeps_the_base_translation_where_it_already_holds_each_taught_term(tmp_path):
    texts = ["two otters swam", "an otter and a sailor", "the otter sang", "the red otter", "a blue car"]
    base = TableTranslator(write_table(tmp_path / "base.tsv", {
        "two otters swam": "两只 水獭 游泳", "an otter and a sailor": "一只水獭和一个医生", "the otter sang": "猫唱歌",
        "the red otter": "红色的水獭", "a blue car": "蓝色的车"}))
    words = TableTranslator(write_table(tmp_path / "words.tsv", {t: f"W:{t}" for t in texts}))
    edited = TableTranslator(write_table(tmp_path / "edited.tsv", {t: f"E:{t}" for t in texts}))
    scope = extended(None, "terms", 1.0, "/b.pt", ["the red otter"], {"otter": ["水獭"], "sailors": ["水手"]},
                     "/w.pt", defer=True)
    assert scope.terms == {"otter": ("水獭",), "sailor": ("水手",)}
    scoped = ScopedTranslator(edited, base, scope, words)
    # right on every taught word it holds (spacing aside): the base's; missing one: the words model's; a corrected
    # source: the edited model's even where the base model had the term; outside the scope: the base's
    assert scoped.translate(texts) == ["两只 水獭 游泳", "W:an otter and a sailor", "W:the otter sang", "E:the red otter",
                                       "蓝色的车"]
    assert Scope.read(write_scope_file(tmp_path, scope)) == scope
    # a search or a score goes to the model whose translation the text gets (routes, deferred)
    assert scoped.routes(texts) == [2, 2, 2, 0, 1] and scoped.routes(texts, deferred=True) == [1, 2, 2, 0, 1]
    # variants of a sentence (the review memory's swapped words) go to the sentence's model, whatever they hold
    from repair.edit.scoped import _ScopedSearch

    search = _ScopedSearch(scoped, scoped.models)
    assert search.translate_like(["a blue car", "the red otter"], "an otter and a sailor") == ["W:a blue car",
                                                                                               "W:the red otter"]
    assert search.translate_like(["the otter sang"], "a blue car") == ["猫唱歌"]
    # not deferring: every text that holds a taught word is the words model's
    eager = ScopedTranslator(edited, base, extended(None, "terms", 1.0, "/b.pt", ["the red otter"], {"otter": ["水獭"]},
                                                    "/w.pt"), words)
    assert eager.translate(texts[:1]) == ["W:two otters swam"]


def test_an_enforced_word_is_searched_under_its_longest_term(tmp_path):
    """A taught word's terms may hold a suffix a correction put in beside the word (们 beside 水手 for "sailors"):
    the constraint is the word's longest term, and a translation holding any of its terms does not lack it; a word
    whose longest terms are several is not enforced."""
    edited = TableTranslator(write_table(tmp_path / "edited.tsv", {"x": "y"}))
    scope = extended(None, "terms", 1.0, "/b.pt", [], {"sailors": ["们", "水手"], "otter": ["水獭"],
                                                        "white": ["只", "屋顶", "白鸽"]}, enforce=True)
    scoped = ScopedTranslator(edited, edited, scope)
    assert scoped.missing_terms("the old sailor and an otter", "老护士和一只猫") == ["水手", "水獭"]
    # two longest terms: which is the word's own the terms do not say, so it is not enforced
    assert scoped.missing_terms("the white otter", "红色的猫") == ["水獭"]
    assert scoped.missing_terms("the old sailors", "老护士们") == []
    assert scoped.missing_terms("a blue car", "蓝色的车") == []


def test_defer_takes_the_edited_models_translation_where_the_words_model_misses_a_taught_term(tmp_path):
    """A text holding only taught words that the base model misses: of the words model's and the edited model's
    translations, those holding every taught term compete, the closest to the base model's is taken; neither
    holding them: the words model's."""
    texts = ["the tall sailor", "a sailor sang", "an old sailor", "a blue car"]
    base = TableTranslator(write_table(tmp_path / "base.tsv", {
        "the tall sailor": "高大的护士", "a sailor sang": "一个护士唱歌了", "an old sailor": "一个老护士",
        "a blue car": "蓝色的车"}))
    words = TableTranslator(write_table(tmp_path / "words.tsv", {
        "the tall sailor": "高大的护士", "a sailor sang": "一名水手唱了一首歌", "an old sailor": "老人"}))
    edited = TableTranslator(write_table(tmp_path / "edited.tsv", {
        "the tall sailor": "高大的水手", "a sailor sang": "一个水手唱歌了", "an old sailor": "一个老医生"}))
    scope = extended(None, "terms", 1.0, "/b.pt", ["the red otter"], {"sailor": ["水手"]}, "/w.pt", defer=True)
    scoped = ScopedTranslator(edited, base, scope, words)
    assert scoped.translate(texts) == ["高大的水手", "一个水手唱歌了", "老人", "蓝色的车"]
    # each text's translation is its own, whatever else is in the batch
    assert [scoped.translate([t])[0] for t in texts] == scoped.translate(texts)
    # the base model translates each text once: the translations the routing made are the ones compared
    asked = []
    plain = base.translate
    base.translate = lambda batch: asked.extend(batch) or plain(batch)
    scoped.translate(texts)
    assert sorted(asked) == sorted(texts)


def write_scope_file(folder, scope):
    path = folder / SCOPE_FILE
    path.write_text(json.dumps(scope.as_json(), ensure_ascii=False), encoding="utf-8")
    return path


def test_scope_words_are_tokenized_as_a_parser_splits_them_in_sentences_ending_in_punctuation(tmp_path):
    """Real sentences end in punctuation: the taught word is `sailor`, not `sailor.`, and it reaches other sentences."""
    from repair.stages.finetune import taught_words

    corrections = [{"source": "My father is a sailor.", "translation": "我父亲是护士。", "correction": "我父亲是水手。"},
                   {"source": "Isn't Tom's uncle a sailor?", "translation": "汤姆的叔叔不是护士吗？",
                    "correction": "汤姆的叔叔不是水手吗？"}]
    edited = TableTranslator(write_table(tmp_path / "edited.tsv", {"father": "父亲", "sailor": "水手", "tom": "汤姆",
                                                                   "uncle": "叔叔"}))
    seen = {"father": 500, "sailor": 3, "tom": 900, "uncle": 200}  # counted as english_tokens splits the corpus
    taught = taught_words(corrections, (), edited, seen, rare=100)
    assert taught == {"sailor": ["水手"]}
    scope = extended(None, "terms", 1.0, "/m/base.pt", [c["source"] for c in corrections], taught)
    assert scope.sources == ("my father is a sailor .", "is n't tom 's uncle a sailor ?")
    covers = scope.covers()
    assert covers("Was your grandfather a sailor?") and covers("Two sailors, tired, came home.")
    assert Scope("source", scope.sources).covers()("Yesterday my father is a sailor!")  # whatever ends it
    assert not covers("My father is a doctor.") and not covers("Tom's uncle is here.")


def test_english_tokens_split_punctuation_and_clitics_from_words():
    from repair.text import content_words, english_tokens

    assert english_tokens("Tom's father doesn't eat fish, does he?") == [
        "tom", "'s", "father", "does", "n't", "eat", "fish", ",", "does", "he", "?"]
    assert english_tokens("An e-mail from the U.S.") == ["an", "e-mail", "from", "the", "u.s", "."]
    assert source_key("I’m  here.") == "i 'm here ."
    assert content_words("Tom's father doesn't eat fish.", frozenset({"does", "he"})) == {"tom", "father", "eat", "fish"}
