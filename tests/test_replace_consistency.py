"""The replacement relation against translators whose behaviour is known: a word-by-word translator that
translates every word consistently in context (a word alone has another, bare, form; plurals, articles, measure
words and questions as Chinese has them) is never flagged, while the same translator ignoring a replacement, or
mistranslating the new word in its sentence, is. On sentences written here, and on Tatoeba's when
../shared/data has them."""

from __future__ import annotations

import hashlib
import json
import random
import re

import pytest

from conftest import need_shared
from repair.fileio import read_jsonl
from repair.purity import run_purity
from repair.purity.parsers.spacy import SpacyParser
from repair.purity.relations import Parsed, ReplaceRelation
from repair.purity.translators import Translator

# singular: (in context, alone, measure word, a person: "们" in the plural without a number before it)
NOUNS = {"brother": ("兄弟", "弟兄", "个", True), "sister": ("姐妹", "姊妹", "个", True),
         "kid": ("孩子", "小孩", "个", True), "friend": ("朋友", "友人", "个", True),
         "man": ("男人", "汉子", "个", True), "cat": ("猫", "猫咪", "只", False), "dog": ("狗", "犬", "条", False),
         "book": ("书", "书籍", "本", False), "letter": ("信", "信函", "封", False),
         "car": ("汽车", "轿车", "辆", False), "bike": ("自行车", "单车", "辆", False),
         "house": ("房子", "住宅", "座", False)}
# other words: (in context, alone)
WORDS = {"red": ("红色", "赤"), "blue": ("蓝色", "蔚"), "old": ("老", "旧"), "young": ("年轻", "幼"),
         "long": ("长", "漫"), "short": ("短", "简"), "big": ("大", "巨"), "small": ("小", "微"),
         "my": ("我的", "吾"), "your": ("你的", "汝"), "his": ("他的", "其"), "you": ("你", "您"),
         "i": ("我", "吾人"), "have": ("有", "拥有"), "has": ("有", "具有"), "bought": ("买", "购买"),
         "sold": ("卖", "出售"), "read": ("读", "阅读"), "saw": ("看见", "目睹"), "sleep": ("睡觉", "睡眠"),
         "where": ("哪里", "何处"), "how": ("", "如何"), "are": ("在", "是"), "is": ("是", "乃"), "do": ("", "做"), "does": ("", "做")}
ADJECTIVES = {"red", "blue", "old", "young", "long", "short", "big", "small"}
NUMBERS = {"a": "一", "an": "一", "one": "一", "two": "两", "three": "三"}
YES_NO = {"do", "does", "did", "is", "are", "can"}
FUNCTION_WORDS = {"the", "a", "an", "this", "that", "of", "for", "in", "on", "at", "to", "with", "by", "from", "and",
                  "or", "but", "is", "are", "was", "were", "be", "do", "does", "did", "you", "i", "he", "she", "it",
                  "we", "they"}
MARKS = {".": "。", "?": "？", "!": "！", ",": "，"}
TOKEN = re.compile(r"[a-z]+|'[a-z]+|[^\sa-z]")


def generated(word: str, kind: str) -> str:
    """Two CJK characters for a word not listed (Tatoeba's), from its hash: one pair in context, another alone
    (none of them a stop token such as 的 or 了, which the distance leaves out)."""
    digest = hashlib.sha256(f"{kind}:{word}".encode()).digest()
    chars = [chr(0x4E00 + int.from_bytes(digest[k:k + 2], "big") % 0x5000) for k in (0, 2)]
    return "".join("之" if c in "的了" else c for c in chars)


def singular(word: str) -> str | None:
    """The listed noun `word` is, in the singular or the plural; None for any other word."""
    return word if word in NOUNS else word[:-1] if word.endswith("s") and word[:-1] in NOUNS else None


def measure(word: str) -> str:
    """The measure word for counting `word` (个 when nothing is counted)."""
    noun = singular(word)
    if noun or not word:
        return NOUNS[noun][2] if noun else "个"
    return "个张条本只"[hashlib.sha256(word.encode()).digest()[0] % 5]


def counted(words: list[str], k: int) -> str:
    """The word the number at k counts: the next one that is not an adjective, unless that is a function word or
    punctuation ("that one for a while" counts nothing: "")."""
    after = next((x for x in words[k + 1:] if x not in ADJECTIVES), "")
    return after if after[:1].isalpha() and after not in FUNCTION_WORDS else ""


class WordByWord(Translator):
    """Word by word, each word as its context wants it: the bare form when a text has one word; "the" dropped;
    a number or an article with the measure word of the noun after it (its adjectives skipped); "how many" 几
    with that measure word in a question, 多少 elsewhere; a person's plural with 们 unless a number or "many"
    comes before it; a yes/no question ends in 吗？. `ignore`: sentences translated as others are (a replacement
    ignored); `misread`: a sentence and a word of it translated wrongly there (and nowhere else)."""

    name = "word-by-word"

    def __init__(self, ignore: dict[str, str] | None = None, misread: dict[str, str] | None = None):
        self.ignore, self.misread = ignore or {}, misread or {}

    def translate(self, texts):
        return [self.one(t) for t in texts]

    def one(self, text: str) -> str:
        wrong = self.misread.get(text)
        words = TOKEN.findall(self.ignore.get(text, text).lower())
        alone = sum(w[0].isalpha() for w in words) == 1
        out = []
        for k, w in enumerate(words):
            if w in MARKS:
                out.append(("吗" if w == "?" and words[0] in YES_NO else "") + MARKS[w])
            elif alone:
                noun = singular(w)
                out.append(NOUNS[noun][1] if noun else WORDS[w][1] if w in WORDS else generated(w, "bare"))
            else:
                out.append("错" + generated(w, "wrong") if w == wrong else self.in_context(words, k))
        return "".join(out)

    @staticmethod
    def in_context(words: list[str], k: int) -> str:
        w, before = words[k], words[k - 1] if k else ""
        if w == "the":
            return ""
        if w in NUMBERS:
            return NUMBERS[w] + measure(counted(words, k))
        if w == "many":
            return ("几" + measure(counted(words, k)) if words[-1] == "?" else "多少") if before == "how" else "很多"
        noun = singular(w)
        if noun:
            plural = noun != w and NOUNS[noun][3] and before not in NUMBERS and before != "many"
            return NOUNS[noun][0] + ("们" if plural else "")
        return WORDS[w][0] if w in WORDS else generated(w, "context")


# Questions, plurals, articles and numbers, and a sentence too short for a phrase
SENTENCES = ["How many brothers does your friend have?", "How many cats do you have?", "Do you have a red car?",
             "My sister bought two old books.", "The young man sold his blue bike.", "The kids read a long letter.",
             "Where are the dogs?", "I saw a big house.", "Cats sleep.", "Your brothers have three small dogs.",
             "I read letters."]
LEXICON = [{"tag": "NNS", "words": ["brothers", "sisters", "kids", "friends", "cats", "dogs", "books", "letters"]},
           {"tag": "NN", "words": ["car", "bike", "house", "book", "letter", "man", "friend", "sister"]},
           {"tag": "JJ", "words": ["red", "blue", "old", "young", "long", "short", "big", "small"]}]


@pytest.fixture(scope="module")
def parser():
    return SpacyParser()


def purity(out, sentences, trees, translator, options):
    """run_purity with the replacement relation alone: (summary, its cases' ids, issues)."""
    summary = run_purity(sentences, None, translator, out, trees=trees, relations=["replace"], thresholds=[0],
                         relation_options={"replace": options})
    return summary, [c["id"] for c in read_jsonl(out / "pairs.jsonl")], read_jsonl(out / "issues.jsonl")


def three_ways(tmp_path, sentences, trees, **options):
    """The cases (as the relation makes them) and their issues under the consistent translator, then under the
    same translator ignoring every replacement, then misreading every new word in its sentence: (summary,
    cases, issues, ignored issues, misread issues)."""
    cases = ReplaceRelation(**options).cases([Parsed(f"t:{k}", s, t) for k, (s, t) in enumerate(zip(sentences, trees))])
    summary, ids, issues = purity(tmp_path / "consistent", sentences, trees, WordByWord(), options)
    assert ids == [c.id for c in cases]
    ignoring = WordByWord(ignore={c.sides[1][1]: c.sides[0][1] for c in cases})
    misreading = WordByWord(misread={c.sides[1][1]: c.info["replaced"][1] for c in cases})
    ignored = purity(tmp_path / "ignoring", sentences, trees, ignoring, options)[2]
    misread = purity(tmp_path / "misreading", sentences, trees, misreading, options)[2]
    return summary, cases, issues, ignored, misread


def test_a_consistent_translator_is_never_flagged_and_its_errors_are(tmp_path, parser):
    lexicon = tmp_path / "lexicon.jsonl"
    lexicon.write_text("".join(json.dumps(group) + "\n" for group in LEXICON), encoding="utf-8")
    summary, cases, issues, ignored, misread = three_ways(
        tmp_path, SENTENCES, parser.parse(SENTENCES), lexicon=str(lexicon), min_context=0, per_word=8,
        max_mutants=40)
    by = summary["by_relation"]["replace"]
    mutants = {c.sides[1][1] for c in cases}
    assert by["cases"] == len(cases) > 60 and by["skipped"] == 0
    assert {"How many cats does your friend have?", "How many dogs do you have?", "Do you have a blue car?",
            "My sister bought two old letters.", "The kids read a long book.", "Where are the cats?"} <= mutants
    assert set(by["in_context"]) == {"noun phrase", "neighbours"}
    # a sentence too short for a phrase short of itself gives no case: its word could only be judged alone
    assert "Dogs sleep." not in mutants and by["filtered"]["no phrase"] == 1
    # the traps: a question's phrase alone is no question (多少, not 几个), a word alone has its bare form
    consistent = WordByWord()
    assert consistent.one("How many brothers") == "多少兄弟" and consistent.one("How many brothers?") == "几个兄弟？"
    assert consistent.one("How many cats does your friend have?") == "几只猫你的朋友有？"
    assert consistent.one("cats") == "猫咪" and consistent.one("Cats sleep.") == "猫睡觉。"
    assert consistent.one("Do you have a red car?") == "你有一辆红色汽车吗？"
    # ... none of which is flagged
    assert issues == []
    # every ignored replacement is
    assert len(ignored) == len(cases) and all(i["evidence"][0] == "replacement ignored" for i in ignored)
    # and every new word mistranslated in its sentence
    assert len(misread) == len(cases) and all("错" in i["evidence"] for i in misread)


def flagged(relation: ReplaceRelation, cases, translator: Translator) -> list:
    """The cases the relation flags (distance > 0) on the translator's translations of their texts."""
    texts = list(dict.fromkeys(t for c in cases for t in c.texts))
    translation = dict(zip(texts, translator.translate(texts)))
    return [c for c in cases if relation.check(c, translation).distance > 0]


class OneWay(Translator):
    """Every word one way in every text of two words or more (two CJK characters from its hash), another way in a
    text of one word: no context rule at all, so a replacement changes its word's translation and nothing else."""

    name = "one-way"

    def translate(self, texts):
        return [self.one(t) for t in texts]

    @staticmethod
    def one(text: str) -> str:
        words = TOKEN.findall(text.lower())
        alone = sum(w[0].isalpha() for w in words) == 1
        return "".join(MARKS.get(w, "") if w in MARKS else generated(w, "bare" if alone else "context") for w in words)


# sentences of our own, questions among them, none of them the lexicon test's
OWN = ["How many brothers do you have?", "How many kids does your sister have?", "Is there a good school near here?",
       "Where did you buy that red coat?", "Why is the old bridge closed?", "Can you lend me a pen?",
       "What time does the last train leave?", "Have you ever seen a white tiger?", "Who wrote this long letter?",
       "The new teacher speaks three languages.", "My uncle sold his old truck last week.",
       "She keeps a small garden behind the house.", "We watched a funny movie on the plane.",
       "The little girl lost her blue umbrella.", "He broke the window with a ball.",
       "Our neighbours have a noisy dog.", "I left my keys in the kitchen.", "The heavy rain flooded the road.",
       "Do you like cold coffee?", "Does your brother play the piano?"]


def test_a_translator_with_one_way_per_word_is_never_flagged_on_sentences_of_our_own(parser):
    relation = ReplaceRelation(candidates="context", min_context=0, per_word=3, max_mutants=6)
    cases = relation.cases([Parsed(f"t:{k}", s, t) for k, (s, t) in enumerate(zip(OWN, parser.parse(OWN)))])
    questions = [c for c in cases if c.sides[0][1].endswith("?")]
    assert len(cases) >= 40 and len(questions) >= 15
    assert flagged(relation, cases, OneWay()) == []
    assert flagged(relation, cases, WordByWord()) == []
    ignoring = OneWay()
    ignoring.one = lambda text, ignore={c.sides[1][1]: c.sides[0][1] for c in cases}: OneWay.one(ignore.get(text, text))
    assert flagged(relation, cases, ignoring) == cases  # and a replacement it ignores is


def test_tatoeba_black_box(parser, shared_data, tmp_path):
    """200 of Tatoeba's English sentences (100 questions, 100 others, of 2 to 12 words), their mutants from the
    rest of its English (candidates=context, the corpus filters on), judged under the three translators; the
    figures are printed (pytest -s)."""
    path = shared_data / "tatoeba-cmn-eng" / "cmn.txt"
    need_shared(path)
    english = list(dict.fromkeys(line.split("\t")[0].lstrip("\ufeff").strip()
                                 for line in path.read_text(encoding="utf-8").splitlines() if "\t" in line))
    pool, rng = [s for s in english if 2 <= len(s.split()) <= 12], random.Random(40)
    sentences = rng.sample([s for s in pool if s.endswith("?")], 100) + rng.sample([s for s in pool if s[-1] != "?"], 100)
    corpus = tmp_path / "corpus.en"
    tested = set(sentences)
    corpus.write_text("\n".join(s for s in english if s not in tested) + "\n", encoding="utf-8")
    relation = ReplaceRelation(candidates="context", corpus=str(corpus))
    cases = relation.cases([Parsed(f"t:{k}", s, t) for k, (s, t) in enumerate(zip(sentences, parser.parse(sentences)))])
    consistent = flagged(relation, cases, WordByWord())
    ignored = flagged(relation, cases, WordByWord(ignore={c.sides[1][1]: c.sides[0][1] for c in cases}))
    misread = flagged(relation, cases, WordByWord(misread={c.sides[1][1]: c.info["replaced"][1] for c in cases}))
    print(f"\nTatoeba, 200 sentences, {len(cases)} cases ({relation.counts()['in_context']}): consistent translator "
          f"flagged {len(consistent)}, ignored replacements caught {len(ignored)}/{len(cases)}, new words misread "
          f"in their sentence caught {len(misread)}/{len(cases)}")
    for c in consistent:
        print("  flagged:", " -> ".join(source for _, source in c.sides))
    assert len(cases) >= 40
    assert consistent == []
    assert ignored == cases
    assert misread == cases


class AsWritten(Translator):
    """Words as the sentence writes them (split at spaces, closing marks apart: "T-shirts" and "Tom's" are one
    word each), every word one way in every text of two words or more and another way in a text of one."""

    name = "as-written"

    def translate(self, texts):
        return [self.one(t) for t in texts]

    @staticmethod
    def one(text: str) -> str:
        words = text.lower().split()
        out = []
        for word in words:
            core = word.rstrip(".?!,")
            out.append(generated(core, "bare" if len(words) == 1 else "context")
                       + "".join(MARKS[c] for c in word[len(core):]))
        return "".join(out)


# sentences of our own with words written as one (hyphens, clitics), questions among them
JOINED = ["Where did you buy those T-shirts?", "She sold her old T-shirts.", "Is your mother-in-law at home?",
          "I met Tom's sister yesterday.", "Did you see Mary's new car?", "Was your father-in-law a teacher?"]


def test_jieba_words_and_words_written_as_one_do_not_flag_a_consistent_translator(parser):
    """jieba cuts the same characters otherwise beside another word (a sentence's "信有" where the phrase ends in
    "信"), and a phrase cut inside a written word ("your mother" of "your mother-in-law") or holding one written
    word ("T-shirts") is another text to a translator: neither may flag a translator that renders each word one
    way (of 150 cases, before: 6, 5 and 12 flagged in jieba's words under the three translators below, 6 in
    characters under the one that reads words as written)."""
    sentences = OWN + JOINED
    trees = parser.parse(sentences)
    parsed = [Parsed(f"t:{k}", s, t) for k, (s, t) in enumerate(zip(sentences, trees))]
    words = ReplaceRelation(candidates="context", min_context=0, per_word=3, max_mutants=6, unit="word")
    cases = words.cases(parsed)
    assert len(cases) >= 50 and sum(c.sides[0][1].endswith("?") for c in cases) >= 20
    assert {"Where did you buy those T-shirts?", "Is your mother-in-law at home?"} <= {c.sides[0][1] for c in cases}
    assert flagged(words, cases, OneWay()) == [] and flagged(words, cases, WordByWord()) == []
    assert flagged(words, cases, AsWritten()) == []
    chars = ReplaceRelation(candidates="context", min_context=0, per_word=3, max_mutants=6)
    assert flagged(chars, cases, AsWritten()) == []
    # while a replacement ignored, or a new word misread in its sentence, is flagged in jieba's words
    ignoring = AsWritten()
    ignoring.one = lambda text, ignore={c.sides[1][1]: c.sides[0][1] for c in cases}: AsWritten.one(ignore.get(text, text))
    assert flagged(words, cases, ignoring) == cases
    assert flagged(words, cases, WordByWord(misread={c.sides[1][1]: c.info["replaced"][1] for c in cases})) == cases


def test_a_question_s_wh_noun_phrase_is_judged_whole():
    """Penn trees (stanza's) make "How many brothers" a WHNP: judged by its neighbours "many brothers do", the
    measure word that "how many" takes in a question (几个兄弟, 几只猫) was left unexplained."""
    nouns = ("brothers", "kids", "cats")
    sentences = [f"How many {noun} do you have?" for noun in nouns]
    trees = [f"(ROOT (SBARQ (WHNP (WHADJP (WRB How) (JJ many)) (NNS {noun})) (SQ (VBP do) (NP (PRP you)) "
             "(VP (VB have))) (. ?)))" for noun in nouns]
    relation = ReplaceRelation(candidates="context", min_context=0)
    cases = relation.cases([Parsed(f"t:{k}", s, t) for k, (s, t) in enumerate(zip(sentences, trees))])
    assert len(cases) == 6 and {c.info["phrases"][0] for c in cases} == {f"How many {noun}" for noun in nouns}
    assert flagged(relation, cases, WordByWord()) == []
    assert flagged(relation, cases, WordByWord(ignore={c.sides[1][1]: c.sides[0][1] for c in cases})) == cases
