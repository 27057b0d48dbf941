"""The spreadsheet round trip: write the sheet, stop, read back what a person filled in."""

import csv
import io
import json
import os

import pytest

from repair.errors import UserError
from repair.review.sheet import ReviewPending, file_review
from repair.review.store import review_stats
from helpers import make_issue


def issue(container, ct, rti, rt, missing=()):
    return make_issue(container, ct, rti, rt, missing)


CHUMMY = issue("chummy bilateral talks with Mr. Trump", "与特朗普先生的双边会谈", "chummy bilateral talks", "亲切的双边会谈", "亲切的")
BOY = issue("the clever boy's dog", "男孩的聪明的狗", "the clever boy", "聪明的男孩", "聪明")
FORMULA = issue("=1+1 said he", "=1+1 他说", "he", "他")
ISSUES = [CHUMMY, BOY, FORMULA]


def read_csv(path):
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"), newline="")))


def write_csv(path, rows):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\r\n")
    w.writeheader()
    w.writerows(rows)
    path.write_text("\ufeff" + buf.getvalue(), encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # saved after the JSONL


def test_first_call_writes_the_sheet_and_says_what_to_fill(tmp_path):
    with pytest.raises(ReviewPending) as e:
        file_review(ISSUES, tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "sheet.csv") in msg and "wrong_1" in msg and "run the same command again" in msg
    rows = read_csv(tmp_path / "sheet.csv")
    assert [r["id"] for r in rows] == [i["id"] for i in ISSUES]
    assert rows[0]["translation_2"] == "亲切的双边会谈" and rows[0]["wrong_1"] == ""
    assert rows[2]["source_1"] == "'=1+1 said he"  # not run as a formula by a spreadsheet
    assert len((tmp_path / "sheet.jsonl").read_text(encoding="utf-8").splitlines()) == 3


def test_round_trip_through_the_csv(tmp_path):
    with pytest.raises(ReviewPending):
        file_review(ISSUES, tmp_path)
    rows = read_csv(tmp_path / "sheet.csv")
    rows[0].update(wrong_1="yes", wrong_2="no", kind="Under",
                   corrected_1="与特朗普先生的亲切的双边会谈")
    rows[1].update(wrong_1="no", wrong_2="no")
    write_csv(tmp_path / "sheet.csv", rows)
    with pytest.raises(ReviewPending, match="1 of 3 issues still to judge"):
        file_review(ISSUES, tmp_path)
    assert review_stats(tmp_path)["judged"] == 2
    # a second call never rewrites the sheet the person is filling
    assert read_csv(tmp_path / "sheet.csv")[0]["wrong_1"] == "yes"
    rows[2].update(wrong_1="y", wrong_2="n", kind="word/phrase mistranslation",
                   corrected_1="“=1+1”，他说")
    write_csv(tmp_path / "sheet.csv", rows)
    corrections = file_review(ISSUES, tmp_path)
    assert [(c["source"], c["kind"]) for c in corrections] == [
        (CHUMMY["container"], "under-translation"), ("=1+1 said he", "word/phrase mistranslation")]
    assert review_stats(tmp_path) == {"judged": 3, "with_error": 2, "precision": 2 / 3, "total": 3}


def test_round_trip_through_the_jsonl(tmp_path):
    with pytest.raises(ReviewPending):
        file_review(ISSUES[:2], tmp_path)
    path = tmp_path / "sheet.jsonl"
    rows = [json.loads(s) for s in path.read_text(encoding="utf-8").splitlines()]
    rows[0].update(wrong_1=False, wrong_2=False)
    rows[1].update(wrong_1=True, wrong_2=True, kind="incorrect modification",
                   corrected_1="聪明的男孩的狗", corrected_2="那个聪明的男孩")
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    corrections = file_review(ISSUES[:2], tmp_path)
    assert [c["correction"] for c in corrections] == ["聪明的男孩的狗", "那个聪明的男孩"]


@pytest.mark.parametrize("fill, message", [
    ({"wrong_1": "maybe", "wrong_2": "no"}, r"sheet.csv:2: wrong_1 must be yes or no"),
    ({"wrong_1": "yes", "wrong_2": "no", "kind": "bad"}, r"sheet.csv:2: unknown kind 'bad'"),
    ({"wrong_1": "yes", "wrong_2": "no", "kind": "under"}, r"sheet.csv:2: .*needs the right translation"),
    ({"wrong_1": "yes", "wrong_2": ""}, r"sheet.csv:2: wrong_2 \(rti\) is empty"),
    ({"id": "ffffffffffff", "source_1": "another run's text", "wrong_1": "no", "wrong_2": "no"},
     r"sheet.csv:2: id 'ffffffffffff' is not an issue"),
])
def test_bad_rows_are_named(tmp_path, fill, message):
    with pytest.raises(ReviewPending):
        file_review(ISSUES, tmp_path)
    rows = read_csv(tmp_path / "sheet.csv")
    rows[0].update(fill)
    write_csv(tmp_path / "sheet.csv", rows)
    with pytest.raises(UserError, match=message):
        file_review(ISSUES, tmp_path)


def test_not_utf8_is_named(tmp_path):
    with pytest.raises(ReviewPending):
        file_review(ISSUES, tmp_path)
    (tmp_path / "sheet.csv").write_bytes("id,wrong_1\n男孩\n".encode("gbk"))
    with pytest.raises(UserError, match="sheet.csv:2: not UTF-8"):
        file_review(ISSUES, tmp_path)


def test_an_id_mangled_by_a_spreadsheet_is_recovered_from_the_texts(tmp_path):
    with pytest.raises(ReviewPending):
        file_review(ISSUES[:2], tmp_path)
    rows = read_csv(tmp_path / "sheet.csv")
    rows[0].update(id="1.23457E+11", wrong_1="no", wrong_2="no")
    rows[1].update(wrong_1="no", wrong_2="no")
    write_csv(tmp_path / "sheet.csv", rows)
    assert file_review(ISSUES[:2], tmp_path) == []
    assert review_stats(tmp_path)["judged"] == 2


def test_a_deleted_sheet_file_is_written_again_while_nothing_is_filled(tmp_path):
    with pytest.raises(ReviewPending):
        file_review(ISSUES, tmp_path)
    (tmp_path / "sheet.csv").unlink()
    with pytest.raises(ReviewPending):
        file_review(ISSUES, tmp_path)
    assert len(read_csv(tmp_path / "sheet.csv")) == 3


def test_a_cell_over_the_csv_field_limit_is_one_clear_message(tmp_path):
    from repair.review.sheet import FIELD_LIMIT

    with pytest.raises(ReviewPending):
        file_review(ISSUES, tmp_path)
    rows = read_csv(tmp_path / "sheet.csv")
    rows[0].update(wrong_1="yes", wrong_2="no", kind="under", corrected_1="男" * 200_000)
    write_csv(tmp_path / "sheet.csv", rows)
    with pytest.raises(ReviewPending):  # a long correction (over the csv module's default 131072) is read back
        file_review(ISSUES, tmp_path)
    rows[1].update(wrong_1="yes", wrong_2="no", kind="under", corrected_1="男" * (FIELD_LIMIT + 1))
    write_csv(tmp_path / "sheet.csv", rows)
    with pytest.raises(UserError, match=r"sheet.csv:3: not a readable CSV row .*more than 4,000,000 characters"):
        file_review(ISSUES, tmp_path)


def test_a_correction_with_a_line_separator_in_the_sheet_is_named(tmp_path):
    with pytest.raises(ReviewPending):
        file_review(ISSUES, tmp_path)
    rows = read_csv(tmp_path / "sheet.csv")
    rows[0].update(wrong_1="yes", wrong_2="no", kind="under", corrected_1="亲切的\u2028会谈")
    write_csv(tmp_path / "sheet.csv", rows)
    with pytest.raises(UserError, match=r"U\+2028 LINE SEPARATOR"):
        file_review(ISSUES, tmp_path)
    assert not (tmp_path / "judgments.jsonl").exists()
