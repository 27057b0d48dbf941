"""The Purity command line, run for real: the two-phase table flow and every bad input."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED_DATA
from repair.fileio import read_jsonl
from repair.purity import bow_distance, run_purity
from repair.purity.parsers.ptb import PtbParser
from repair.purity.translators import TableTranslator, Translator

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "purity"
SENTENCES = FIXTURES / "sentences.txt"
TREES = FIXTURES / "trees.txt"
PURITY_INPUTS = SHARED_DATA / "purity-inputs"

# What the fixture's three trees yield, in the order the run lists them.
EXPECTED_TEXTS = [
    "Emma Stone starred as Holmes in a movie based on Bad Blood.",
    "Holmes in a movie based on Bad Blood",
    "a movie based on Bad Blood",
    "The old fisherman sold three fresh fish to the busy market near the harbor.",
    "three fresh fish",
    "the busy market near the harbor",
    "The governor's first budget proposed two free years at community colleges.",
    "The governor's first budget",
    "two free years at community colleges",
    "two free years",
]


def purity(*overrides, cwd=REPO):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "repair.purity", *map(str, overrides)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def assert_user_error(result, *fragments):
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "error: " in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.fixture
def table(tmp_path):
    """The fixture's texts translated (by hand) as a TSV."""
    translations = (FIXTURES / "translations.zh.txt").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "table.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in zip(EXPECTED_TEXTS, translations)), encoding="utf-8")
    return path


def test_two_phase_table_flow(tmp_path):
    out = tmp_path / "run"
    first = purity(f"input={SENTENCES}", "parser=ptb", f"parser.trees={TREES}", "translator=table", f"out={out}")
    assert_user_error(first, str(out / "to_translate.txt"))
    assert (out / "to_translate.txt").read_text(encoding="utf-8").splitlines() == EXPECTED_TEXTS
    assert len(read_jsonl(out / "pairs.jsonl")) == 9

    # Any system translates to_translate.txt line by line; the user pastes source and translation.
    translations = (FIXTURES / "translations.zh.txt").read_text(encoding="utf-8").splitlines()
    table = tmp_path / "translations.tsv"
    sources = (out / "to_translate.txt").read_text(encoding="utf-8").splitlines()
    table.write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources, translations)), encoding="utf-8")

    workdir = tmp_path / "cwd"
    workdir.mkdir()
    second = purity(f"input={SENTENCES}", "parser=ptb", f"parser.trees={TREES}", "translator=table",
                    f"translator.table={table}", "thresholds=[0,1,2,3]", f"out={out}", cwd=workdir)
    assert second.returncode == 0, second.stderr
    assert not (out / "to_translate.txt").exists()
    assert (out / "translations.tsv").read_text(encoding="utf-8") == table.read_text(encoding="utf-8")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert {k: summary[k] for k in ("sentences", "rtis", "pairs", "texts", "skipped_pairs", "issues")} == {
        "sentences": 3, "rtis": 7, "pairs": 9, "texts": 10, "skipped_pairs": 0,
        "issues": {"0": 4, "1": 1, "2": 0, "3": 0}}
    assert summary["characters_translated"] == sum(len(t) for t in EXPECTED_TEXTS)
    assert set(summary["seconds"]) == {"initialization", "pair_construction", "translation", "detection", "total"}

    issues = read_jsonl(out / "issues.jsonl")
    assert [(i["sides"][1]["source"], i["distance"], i["evidence"]) for i in issues] == [
        ("the busy market near the harbor", 1, ["集"]),
        ("two free years at community colleges", 1, ["院"]),
        ("two free years", 1, ["个"]),
        ("two free years", 2, ["个", "份"]),
    ]
    for issue in issues:
        assert set(issue) == {"id", "relation", "sentence", "sides", "distance", "evidence"}
        assert issue["relation"] == "rti" and [s["role"] for s in issue["sides"]] == ["container", "rti"]
        container, rti = (s["source"] for s in issue["sides"])
        assert issue["id"] == hashlib.sha1(f"{container}\t{rti}".encode()).hexdigest()[:12]
    assert issues[3]["sides"][0]["source"] == "two free years at community colleges"
    assert issues[3]["sentence"] == EXPECTED_TEXTS[6]

    report = (out / "issues.md").read_text(encoding="utf-8")
    assert report.count("\n## ") == 2  # two sentences with issues, each one heading
    assert "two free years at community colleges" in report
    assert len((out / "trees.txt").read_text(encoding="utf-8").splitlines()) == 3
    assert "issues at d > 1" in second.stdout and (out / "purity.log").is_file()
    assert list(workdir.iterdir()) == []  # Hydra writes nothing into the working directory


def test_ptb_without_input_tests_the_trees_own_text(tmp_path, table):
    out = tmp_path / "run"
    result = purity("parser=ptb", f"parser.trees={TREES}", f"out={out}")
    assert_user_error(result, "to_translate.txt")
    texts = (out / "to_translate.txt").read_text(encoding="utf-8").splitlines()
    assert texts[0] == "Emma Stone starred as Holmes in a movie based on Bad Blood."
    assert texts[1:3] == EXPECTED_TEXTS[1:3]


def test_blank_lines_are_skipped_and_counted(tmp_path, table):
    lines = SENTENCES.read_text(encoding="utf-8").splitlines()
    source = tmp_path / "input.txt"
    source.write_text("\n" + lines[0] + "\n   \n" + "\n".join(lines[1:]) + "\n\n", encoding="utf-8")
    out = tmp_path / "run"
    result = purity(f"input={source}", "parser=ptb", f"parser.trees={TREES}", f"translator.table={table}", f"out={out}")
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["blank_lines_skipped"] == 3 and summary["sentences"] == 3


def test_overlong_sentence_is_skipped_with_a_warning(tmp_path, table):
    long_sentence = " ".join(["word"] * 201) + "."
    source = tmp_path / "input.txt"
    source.write_text(SENTENCES.read_text(encoding="utf-8") + long_sentence + "\n", encoding="utf-8")
    out = tmp_path / "run"
    result = purity(f"input={source}", "parser=ptb", f"parser.trees={TREES}", f"translator.table={table}", f"out={out}")
    assert result.returncode == 0, result.stderr
    assert f"{source}:4: sentence of 201 words skipped" in result.stdout
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["long_sentences_skipped"] == 1 and summary["sentences"] == 3


def test_malformed_tree_names_its_line(tmp_path):
    trees = tmp_path / "trees.txt"
    good = "(ROOT (S (NP (DT the) (NN cat)) (VP (VBD sat))))"
    trees.write_text(f"{good}\n(ROOT\n  (S (NP (DT a) (NN dog))\n     (VP (VBD ran) ())))\n{good}\n", encoding="utf-8")
    assert_user_error(purity("parser=ptb", f"parser.trees={trees}", f"out={tmp_path / 'run'}"),
                      f"{trees}:4: malformed tree")
    trees.write_text(f"{good}\n\n{good}\n(ROOT (S (NP the cat)\n", encoding="utf-8")
    assert_user_error(purity("parser=ptb", f"parser.trees={trees}", f"out={tmp_path / 'run'}"),
                      f"{trees}:4: malformed tree")


@pytest.mark.parametrize("rows, message", [("one\t一\n\nno tab here\n", ":3: no tab"),
                                           ("one\t一\ntwo\t \n", ":2: empty translation after the tab for 'two'")])
def test_bad_table_row_names_its_line(tmp_path, rows, message):
    table = tmp_path / "table.tsv"
    table.write_text(rows, encoding="utf-8")
    result = purity(f"input={SENTENCES}", "parser=ptb", f"parser.trees={TREES}", f"translator.table={table}",
                    f"out={tmp_path / 'run'}")
    assert_user_error(result, f"{table}{message}")


def test_out_under_a_file_is_one_clear_message(tmp_path):
    (tmp_path / "file").write_text("x")
    result = purity(f"input={SENTENCES}", "parser=ptb", f"parser.trees={TREES}", f"out={tmp_path / 'file' / 'run'}")
    assert_user_error(result, f"{tmp_path / 'file'} is a file, not a folder; choose another out")


def test_non_utf8_input_is_a_clear_error(tmp_path):
    source = tmp_path / "input.txt"
    source.write_bytes("The caf\u00e9 opened.\n".encode("utf-8") + "Na\u00efve text\n".encode("latin-1"))
    result = purity(f"input={source}", "parser=ptb", f"parser.trees={TREES}", f"out={tmp_path / 'run'}")
    assert_user_error(result, f"{source}:2: not UTF-8")


def test_sentences_without_their_trees_are_a_clear_error(tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("A sentence that has no tree at all.\n", encoding="utf-8")
    result = purity(f"input={source}", "parser=ptb", f"parser.trees={TREES}", f"out={tmp_path / 'run'}")
    assert_user_error(result, "has no tree in", "one tree per sentence")


def test_configuration_mistakes_are_clear_errors(tmp_path):
    assert_user_error(purity("parser=ptb", f"out={tmp_path / 'run'}"), "parser.trees=")
    assert_user_error(purity("parser=ptb", f"parser.trees={TREES}", "+parser.beam=3", f"out={tmp_path / 'run'}"),
                      "parser=ptb has no option 'beam'")
    assert_user_error(purity("parser=ptb", f"parser.trees={TREES}", "unit=morpheme", f"out={tmp_path / 'run'}"),
                      "unit='morpheme'")
    assert_user_error(purity(f"input={tmp_path / 'absent.txt'}", "parser=ptb", f"parser.trees={TREES}",
                             f"out={tmp_path / 'run'}"), "absent.txt: no such file")
    assert_user_error(purity("parser=ptb", f"parser.trees={TREES}", f"stopwords={tmp_path / 'stop.txt'}",
                             f"out={tmp_path / 'run'}"), "stop.txt: no such file")


class RecordingTable(Translator):
    """A table translator that records each batch it is asked for."""

    name = "recording"

    def __init__(self, table):
        self.table = TableTranslator(str(table))
        self.batches = []

    def translate(self, texts):
        self.batches.append(list(texts))
        return self.table.translate(texts)


def test_every_text_is_translated_once_in_one_batch(tmp_path, table):
    translator = RecordingTable(table)
    # The first sentence twice: its texts are still translated once.
    sentences = SENTENCES.read_text(encoding="utf-8").splitlines()
    trees = PtbParser(str(TREES)).trees
    summary = run_purity(sentences + sentences[:1], None, translator, tmp_path / "run",
                         thresholds=(3, 0, 1), trees=trees + trees[:1])
    assert translator.batches == [EXPECTED_TEXTS]
    assert summary["issues"] == {"0": 4, "1": 1, "3": 0}
    assert summary["sentences"] == 4 and summary["pairs"] == 9


def test_word_unit_and_latin_skip(tmp_path, table):
    rows = table.read_text(encoding="utf-8").replace("三条鲜鱼", "three fresh fish")
    latin = tmp_path / "latin.tsv"
    latin.write_text(rows, encoding="utf-8")
    sentences = SENTENCES.read_text(encoding="utf-8").splitlines()
    kept = run_purity(sentences, PtbParser(str(TREES)), TableTranslator(str(latin)), tmp_path / "a",
                      skip_latin=False)
    skipped = run_purity(sentences, PtbParser(str(TREES)), TableTranslator(str(latin)), tmp_path / "b")
    # The sentence's translation has Latin letters now, so both of its pairs are skipped.
    assert kept["skipped_pairs"] == 0 and skipped["skipped_pairs"] == 2
    words = run_purity(sentences, PtbParser(str(TREES)), TableTranslator(str(table)), tmp_path / "c", unit="word")
    assert words["settings"]["unit"] == "word"
    for issue in read_jsonl(tmp_path / "c" / "issues.jsonl"):
        container, rti = (s["translation"] for s in issue["sides"])
        assert issue["distance"] == bow_distance(rti, container, "word")


def word_cipher(text: str) -> str:
    """A stand-in translation system: each English word becomes one CJK character; texts of more
    than 12 words lose every word whose character code is a multiple of 5 (under-translation)."""
    words = text.split()
    chars = [chr(0x4E00 + int(hashlib.md5(w.encode()).hexdigest(), 16) % 20000) for w in words]
    if len(words) > 12:
        chars = [c for c in chars if ord(c) % 5]
    return "".join(chars)


@pytest.mark.skipif(not (PURITY_INPUTS / "politics.txt").is_file(), reason="../shared/data/purity-inputs is absent")
def test_spacy_path_end_to_end_on_the_papers_inputs(tmp_path):
    pytest.importorskip("repair.purity.parsers.spacy")
    source = PURITY_INPUTS / "politics.txt"
    out = tmp_path / "run"
    first = purity(f"input={source}", "parser=spacy", "translator=table", f"out={out}")
    assert_user_error(first, "to_translate.txt")
    texts = (out / "to_translate.txt").read_text(encoding="utf-8").splitlines()
    table = tmp_path / "table.tsv"
    table.write_text("".join(f"{t}\t{word_cipher(t)}\n" for t in texts), encoding="utf-8")
    second = purity(f"input={source}", "parser=spacy", f"translator.table={table}", f"out={out}")
    assert second.returncode == 0, second.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["sentences"] == 100 and summary["texts"] == len(texts)
    assert summary["pairs"] == len(read_jsonl(out / "pairs.jsonl")) > 100
    counts = [summary["issues"][d] for d in ("0", "1", "2", "3")]
    assert counts[0] > 0 and counts == sorted(counts, reverse=True)
    issues = read_jsonl(out / "issues.jsonl")
    assert len(issues) == counts[0]
    for issue in issues:
        container, rti = (s["translation"] for s in issue["sides"])
        assert issue["distance"] == bow_distance(rti, container) > 0


def test_both_relations_from_the_command_line(tmp_path):
    out = tmp_path / "run"
    first = purity(f"input={SENTENCES}", "parser=ptb", f"parser.trees={TREES}", "translator=table", f"out={out}",
                   "relations=[rti,replace]", "replace.min_context=0", "replace.per_word=1")
    assert_user_error(first, str(out / "to_translate.txt"))
    texts = (out / "to_translate.txt").read_text(encoding="utf-8").splitlines()
    assert set(EXPECTED_TEXTS) < set(texts) and len(texts) == len(set(texts))
    table = tmp_path / "table.tsv"
    table.write_text("".join(f"{t}\t{t[::-1]}\n" for t in texts), encoding="utf-8")
    done = purity(f"input={SENTENCES}", "parser=ptb", f"parser.trees={TREES}", "translator=table", f"out={out}",
                  "relations=[rti,replace]", "replace.min_context=0", "replace.per_word=1", f"translator.table={table}")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["by_relation"]) == {"rti", "replace"} and summary["by_relation"]["replace"]["cases"] > 0
    assert summary["settings"]["replace"]["per_word"] == 1
    bad = purity(f"input={SENTENCES}", "parser=ptb", f"parser.trees={TREES}", f"out={tmp_path / 'x'}",
                 "relations=[rti,sit]")
    assert_user_error(bad, "relations=['rti', 'sit']: choose one or more of rti, replace")
