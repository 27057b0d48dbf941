"""CorrectionStore, review_stats and load_corrections on hand-made judgments."""

import json

import pytest

from repair.errors import UserError
from repair.review.store import CorrectionStore, load_corrections, review_stats
from helpers import make_issue


def issue(container, ct, rti, rt, missing=()):
    return make_issue(container, ct, rti, rt, missing, sentence=container + ".")


CHUMMY = issue("chummy bilateral talks with Mr. Trump", "与特朗普先生的双边会谈", "chummy bilateral talks", "亲切的双边会谈", "亲切的")
BOY = issue("the clever boy's dog", "男孩的聪明的狗", "the clever boy", "聪明的男孩", "聪明")
# The same container with another RTI inside it: one source, two issues.
TRUMP = issue("chummy bilateral talks with Mr. Trump", "与特朗普先生的双边会谈", "Mr. Trump", "特朗普先生")
ISSUES = [CHUMMY, BOY, TRUMP]


def lines(path):
    return [json.loads(s) for s in path.read_text(encoding="utf-8").splitlines() if s.strip()]


def test_judgments_and_corrections_are_on_disk_as_made(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    store.record(CHUMMY["id"], ["container"], "under-translation", {"container": "与特朗普先生的亲切的双边会谈"})
    store.record(BOY["id"], [])
    js = lines(tmp_path / "judgments.jsonl")
    assert [j["issue"] for j in js] == [CHUMMY["id"], BOY["id"]]
    assert js[1]["wrong"] == [] and js[1]["kind"] is None
    (c,) = lines(tmp_path / "corrections.jsonl")
    assert c["source"] == CHUMMY["container"] and c["translation"] == CHUMMY["container_translation"]
    assert c["correction"] == "与特朗普先生的亲切的双边会谈" and c["kind"] == "under-translation"
    assert c["issues"] == [CHUMMY["id"]] and c["time"]
    assert review_stats(tmp_path) == {"judged": 2, "with_error": 1, "precision": 0.5, "total": 3}


def test_same_source_in_two_issues_gives_one_correction_with_both_ids(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    fixed = "与特朗普先生的亲切的双边会谈"
    store.record(CHUMMY["id"], ["container"], "under-translation", {"container": fixed})
    store.record(TRUMP["id"], ["container"], "under-translation", {"container": fixed})
    (c,) = lines(tmp_path / "corrections.jsonl")
    assert c["issues"] == [CHUMMY["id"], TRUMP["id"]]
    assert store.correction_for(CHUMMY["container"]) == fixed


def test_revised_judgment_wins_and_withdraws_its_correction(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    store.record(BOY["id"], ["container"], "incorrect modification", {"container": "聪明的男孩的狗"})
    assert len(lines(tmp_path / "corrections.jsonl")) == 1
    store.record(BOY["id"], [])  # on second thought, a false positive
    assert lines(tmp_path / "corrections.jsonl") == []
    assert len(lines(tmp_path / "judgments.jsonl")) == 2  # the log keeps both
    again = CorrectionStore(tmp_path, ISSUES)
    assert again.judgment(BOY["id"])["wrong"] == []
    assert again.stats()["with_error"] == 0


def test_equal_judgment_is_not_logged_twice(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    store.record(BOY["id"], [])
    store.record(BOY["id"], [])
    assert len(lines(tmp_path / "judgments.jsonl")) == 1


def test_bad_judgments_are_refused(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    with pytest.raises(UserError, match="no correction"):
        store.record(BOY["id"], ["rti"], "under-translation", {})
    with pytest.raises(UserError, match="still the model's translation"):
        store.record(BOY["id"], ["rti"], "under-translation", {"rti": " 聪明的 男孩 "})
    with pytest.raises(UserError, match="unknown kind"):
        store.record(BOY["id"], ["rti"], "typo", {"rti": "聪明男孩"})
    with pytest.raises(UserError, match="no issue"):
        store.record("000000000000", [])
    assert not (tmp_path / "judgments.jsonl").exists()


def test_a_line_torn_by_a_crash_is_dropped_and_the_log_goes_on(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    store.record(BOY["id"], [])
    with open(tmp_path / "judgments.jsonl", "ab") as f:
        f.write(b'{"issue": "' + CHUMMY["id"].encode() + b'", "corrections": {"rti": "\xe4\xba')  # killed mid-write
    assert review_stats(tmp_path)["judged"] == 1
    store = CorrectionStore(tmp_path, ISSUES)
    store.record(CHUMMY["id"], [])
    assert [j["issue"] for j in lines(tmp_path / "judgments.jsonl")] == [BOY["id"], CHUMMY["id"]]


def test_a_corrupt_line_in_the_middle_is_named(tmp_path):
    (tmp_path / "judgments.jsonl").write_text('{"issue": "a", "wrong": [], "kind": null, "corrections": {}}\nnot json\n{}\n')
    with pytest.raises(UserError, match=r"judgments.jsonl:2: not valid JSON"):
        review_stats(tmp_path)


def test_hand_edited_corrections_are_kept_aside(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    store.record(BOY["id"], ["container"], "incorrect modification", {"container": "聪明的男孩的狗"})
    (tmp_path / "corrections.jsonl").write_text("edited by hand\n", encoding="utf-8")
    store.record(CHUMMY["id"], [])
    (aside,) = tmp_path.glob("corrections.edited-*.jsonl")
    assert aside.read_text(encoding="utf-8") == "edited by hand\n"
    assert lines(tmp_path / "corrections.jsonl")[0]["source"] == BOY["container"]


# ---------------------------------------------------------------- load_corrections


def correction(source, correction, issues, kind="under-translation", translation="模型"):
    return json.dumps({"source": source, "translation": translation, "correction": correction, "kind": kind,
                       "issues": issues, "time": "2026-01-01T00:00:00+00:00"}, ensure_ascii=False)


def test_load_reads_what_the_store_wrote(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    store.record(CHUMMY["id"], ["container", "rti"], "under-translation",
                 {"container": "与特朗普先生的亲切的双边会谈", "rti": "亲切的双边会谈。"})
    got, notes = load_corrections(tmp_path / "corrections.jsonl", {i["id"]: i for i in ISSUES})
    assert [c["source"] for c in got] == [CHUMMY["container"], CHUMMY["rti"]]
    assert notes == {"superseded": [], "duplicates": 0}


def test_load_latest_wins_duplicates_tolerated(tmp_path):
    p = tmp_path / "c.jsonl"
    a, b = BOY["id"], CHUMMY["id"]
    p.write_text("\n".join([correction("the boy", "男孩", [a]), correction("the boy", "男孩", [a]),
                            correction("the boy", "那个男孩", [b]), correction("a dog", "一只狗", [a])]) + "\n",
                 encoding="utf-8")
    got, notes = load_corrections(p, {i["id"]: i for i in ISSUES})
    assert [(c["source"], c["correction"], c["issues"]) for c in got] == [
        ("the boy", "那个男孩", [a, b]), ("a dog", "一只狗", [a])]
    assert notes["duplicates"] == 1
    (note,) = notes["superseded"]
    assert "the boy" in note and "那个男孩" in note and "line 3" in note


@pytest.mark.parametrize("text, message", [
    ('{"source": "x"}\n', r"c.jsonl:1: correction lacks translation, correction, kind, issues"),
    (correction("x", "y", ["i"], kind="typo") + "\n", r"c.jsonl:1: unknown kind 'typo'"),
    ("\n" + correction("x", "y", ["i"]) + "\n{oops\n", r"c.jsonl:3: not valid JSON"),
    ("\n\n", r"c.jsonl: no corrections in it"),
])
def test_load_names_the_bad_line(tmp_path, text, message):
    p = tmp_path / "c.jsonl"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        load_corrections(p)


def test_load_names_unknown_issue_ids(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(correction("x", "y", [BOY["id"], "deadbeef0000"]) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"issues this run does not have: deadbeef0000 \(line 1\)"):
        load_corrections(p, {i["id"]: i for i in ISSUES})
