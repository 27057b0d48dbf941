"""CorrectionStore, review_stats and load_corrections on hand-made judgments."""

import json
import os
import time

import pytest

from repair.errors import UserError
from repair.fileio import append_jsonl
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


def test_a_hand_edit_found_at_start_is_kept_aside_once(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    store.record(BOY["id"], ["container"], "incorrect modification", {"container": "聪明的男孩的狗"})
    store.close()
    path = tmp_path / "corrections.jsonl"
    path.write_text("edited by hand\n", encoding="utf-8")
    later = path.stat().st_mtime_ns + 10**9
    os.utime(path, ns=(later, later))  # edited after the last judgment
    for _ in range(2):
        CorrectionStore(tmp_path, ISSUES).close()
    (aside,) = tmp_path.glob("corrections.edited-*.jsonl")
    assert aside.read_text(encoding="utf-8") == "edited by hand\n"
    assert lines(path)[0]["correction"] == "聪明的男孩的狗"


def test_two_stores_of_one_process_write_in_turn_without_losing_or_copying(tmp_path):
    a, b = CorrectionStore(tmp_path, ISSUES), CorrectionStore(tmp_path, ISSUES)
    a.record(BOY["id"], ["container"], "incorrect modification", {"container": "聪明的男孩的狗"})
    b.record(CHUMMY["id"], ["rti"], "under", {"rti": "亲切友好的双边会谈"})
    assert {c["correction"] for c in lines(tmp_path / "corrections.jsonl")} == {"聪明的男孩的狗", "亲切友好的双边会谈"}
    assert not list(tmp_path.glob("corrections.edited-*"))


def test_a_crash_between_the_two_writes_is_repaired_when_the_folder_opens(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    store.record(BOY["id"], ["container"], "incorrect modification", {"container": "聪明的男孩的狗"})
    store.close()
    path = tmp_path / "corrections.jsonl"
    before = path.read_bytes()
    # killed after the judgment reached the log, before corrections.jsonl was rewritten, and in the middle of
    # an atomic write: the log has a judgment the corrections lack, and a temporary file is left
    time.sleep(0.01)
    append_jsonl(tmp_path / "judgments.jsonl", {"issue": CHUMMY["id"], "wrong": ["rti"], "kind": "under-translation",
                                               "corrections": {"rti": "亲切的双边会谈"}, "time": "t"})
    (tmp_path / ".corrections.jsonl.x1y2.tmp").write_text("half")
    assert path.read_bytes() == before
    CorrectionStore(tmp_path, ISSUES).close()
    assert {c["correction"] for c in lines(path)} == {"聪明的男孩的狗", "亲切的双边会谈"}
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".writer")) == [
        "corrections.jsonl", "judgments.jsonl", "progress.json"]  # no temporary file, no "edited" copy
    assert json.loads((tmp_path / "progress.json").read_text())["judged"] == 2


def test_corrections_kept_as_judgments_are_made_are_those_made_afresh_from_the_log(tmp_path):
    """The store folds each new judgment into its corrections (a revision makes them again): after every one of
    300 judgments of issues that share sources and corrections (revisions, kinds, how they were made among them),
    its corrections and corrections.jsonl are what a store opened afresh on the log makes of it."""
    import random

    rng = random.Random(7)
    rtis = [("the old sailor", "年老的水手"), ("the quiet nurse", "安静的护士"), ("the brave pilot", "勇敢的飞行员")]
    issues = [issue(f"{rti} waited near the {place}", f"{rt}在{zh}附近等。", rti, rt)
              for rti, rt in rtis for place, zh in (("bridge", "桥"), ("river", "河"), ("tower", "塔"), ("shop", "店"))]
    path = tmp_path / "corrections.jsonl"
    store = CorrectionStore(tmp_path, issues)
    for n in range(300):
        iss = rng.choice(issues)
        wrong = rng.choice([[], ["container"], ["rti"], ["container", "rti"]])
        fixed = {role: rng.choice(["甲", "乙"]) + iss["sides"][k]["translation"]
                 for k, role in enumerate(("container", "rti")) if role in wrong}
        how = {role: {"origin": rng.choice(["suggestion", "edited"]), "typed": n % 3} for role in wrong}
        store.record(iss["id"], wrong, rng.choice(["under", "over", "unclear"]), fixed, how=how if n % 2 else None)
        if n % 15 == 0 or n == 299:
            kept, text = store.corrections(), path.read_text(encoding="utf-8")
            with CorrectionStore(tmp_path, issues) as fresh:
                assert kept == fresh.corrections()
                assert text == path.read_text(encoding="utf-8") == "".join(
                    json.dumps(c, ensure_ascii=False) + "\n" for c in fresh.corrections())
    assert len(store.corrections()) > 6 and not list(tmp_path.glob("corrections.edited-*"))
    store.close()


def test_loop_reads_the_review_with_its_corrections_rebuilt(tmp_path):
    store = CorrectionStore(tmp_path, ISSUES)
    store.record(BOY["id"], [])
    store.close()
    append_jsonl(tmp_path / "judgments.jsonl", {"issue": BOY["id"], "wrong": ["container"], "kind": "under",
                                               "corrections": {"container": "聪明的男孩的狗"}, "time": "t"})
    with CorrectionStore(tmp_path, ISSUES):  # what stage_review does before it reads the review
        pass
    got, _ = load_corrections(tmp_path / "corrections.jsonl", {i["id"]: i for i in ISSUES})
    assert [c["correction"] for c in got] == ["聪明的男孩的狗"]


@pytest.mark.parametrize("ch", ["\u2028", "\u2029", "\x85", "\n", "\r", "\x0b", "\x0c", "\x1e", "\x00", "\x1b"])
def test_a_correction_with_a_line_break_or_control_character_is_refused_before_it_is_saved(tmp_path, ch):
    store = CorrectionStore(tmp_path, ISSUES)
    with pytest.raises(UserError, match=rf"corrected rti translation contains a (line break|control character) "
                                        rf"\(U\+{ord(ch):04X} .*\) at character 4; a translation is one line"):
        store.record(BOY["id"], ["rti"], "under", {"rti": f"聪明的{ch}男孩"})
    assert store.latest == {} and not (tmp_path / "judgments.jsonl").exists()


def test_any_other_text_is_saved_reloaded_and_fine_tuned_on_unchanged(tmp_path):
    from repair.data.prepare import clean_text

    texts = ["聪明的男孩😀👍🏽", "男孩 שלום مرحبا", "男孩e\u0301\u0308", "\u200f男孩\u200e", "𠀀𪚥男孩", "男" * 100_000]
    store = CorrectionStore(tmp_path, [BOY])
    for t in texts:
        store.record(BOY["id"], ["rti"], "under", {"rti": t})
        store.close()
        store = CorrectionStore(tmp_path, [BOY])
        assert store.judgment(BOY["id"])["corrections"]["rti"] == t
        (got,), _ = load_corrections(tmp_path / "corrections.jsonl", {BOY["id"]: BOY})
        assert got["correction"] == t
        assert clean_text(got["correction"]) == t  # what binarize_pairs gives fairseq to fine-tune on


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


def test_a_side_the_model_translated_as_nothing_is_corrected_and_read_back(tmp_path):
    """An empty translation is the model's under-translation at its worst: the store keeps its correction, and the
    loop reads it back (it once stopped the loop: 'translation' must be a non-empty text)."""
    empty = issue("the old man read a long letter", "", "a long letter", "一封长信", ["一", "封", "长", "信"])
    with CorrectionStore(tmp_path, [empty]) as store:
        store.record(empty["id"], ["container"], "under-translation", {"container": "老人读了一封长信。"})
    (got,), _ = load_corrections(tmp_path / "corrections.jsonl", {empty["id"]: empty})
    assert (got["source"], got["translation"], got["correction"]) == (empty["container"], "", "老人读了一封长信。")
    p = tmp_path / "c.jsonl"
    p.write_text(correction("x", " ", [empty["id"]]) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match="'correction' must be a non-empty text"):
        load_corrections(p)


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
