"""Review in a spreadsheet: write review/sheet.csv and review/sheet.jsonl, read back whichever was filled in."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from repair.errors import UserError
from repair.fileio import iter_jsonl, json_line, read_text_lines, write_jsonl_atomic, write_text_atomic
from repair.issues import best_suggestion, issue_id
from repair.review.store import KINDS, CorrectionStore, parse_kind
from repair.stats import edit_distance, squeeze

SHEET_CSV = "sheet.csv"
SHEET_JSONL = "sheet.jsonl"
YES = {"yes", "y", "x", "1", "true", "wrong", "是", "错"}
NO = {"no", "n", "0", "false", "ok", "否", "对"}
# A spreadsheet runs a cell that starts with one of these as a formula; model output is untrusted.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# The longest cell read back (the csv module's default, 131072, is near a long correction's size).
FIELD_LIMIT = 4_000_000
# Sheets written before issues had sides named their columns by the RTI relation's roles.
LEGACY = {"container_wrong": "wrong_1", "rti_wrong": "wrong_2", "corrected_container_translation": "corrected_1",
          "corrected_rti_translation": "corrected_2", "container": "source_1", "rti": "source_2"}


def columns(issues: list[dict]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(given, to fill): per side k = 1, 2, ... role_k, source_k, translation_k and suggested_k (its best
    suggested correction, if any) given; wrong_k and corrected_k to fill; one column set per side of the issue
    with the most sides."""
    n = max((len(i["sides"]) for i in issues), default=2)
    given = ("id", "relation",
             *(f"{c}_{k}" for k in range(1, n + 1) for c in ("role", "source", "translation", "suggested")),
             "evidence")
    to_fill = (*(f"wrong_{k}" for k in range(1, n + 1)), "kind", *(f"corrected_{k}" for k in range(1, n + 1)))
    return given, to_fill


class ReviewPending(UserError):
    """The review is not finished yet: a person has to fill something in, then run the same command again."""


def _cell(text: str) -> str:
    return "'" + text if text.startswith(FORMULA_START) else text


def _uncell(text: str) -> str:
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_START) else text


def sheet_rows(issues: list[dict], judgments: dict[str, dict] | None = None,
               projected: dict[str, dict] | None = None) -> list[dict]:
    """One row per issue; filled from `judgments` (latest per issue id) where there is one. `projected`: {phrase:
    {"text", ...}} (repair.review.align.ProjectedPrefills): a phrase side of a row not judged yet is suggested the
    projection of its sentence's correction."""
    given, to_fill = columns(issues)
    rows = []
    for i in issues:
        row = {k: "" for k in (*given, *to_fill)}
        row.update(id=i["id"], relation=i["relation"], evidence=" ".join(i.get("evidence") or []))
        j = (judgments or {}).get(i["id"])
        for k, s in enumerate(i["sides"], 1):
            best = best_suggestion(i, s["role"])
            mine = (projected or {}).get(s["source"]) if j is None else None
            row.update({f"role_{k}": s["role"], f"source_{k}": s["source"], f"translation_{k}": s["translation"],
                        f"suggested_{k}": mine["text"] if mine else best["text"] if best else ""})
        if j is not None:
            for k, s in enumerate(i["sides"], 1):
                row[f"wrong_{k}"] = "yes" if s["role"] in j["wrong"] else "no"
                row[f"corrected_{k}"] = j["corrections"].get(s["role"], "")
            row["kind"] = j["kind"] or ""
        rows.append(row)
    return rows


def csv_text(rows: list[dict]) -> str:
    """CSV with a BOM (so a spreadsheet opens it as UTF-8), formula-like cells quoted with a leading '."""
    buf = io.StringIO()
    names = list(rows[0]) if rows else [c for part in columns([]) for c in part]
    w = csv.DictWriter(buf, fieldnames=names, lineterminator="\r\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _cell(str(r[k])) for k in names})
    return "\ufeff" + buf.getvalue()


def _jsonl_rows(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        o = dict(r)
        o["evidence"] = r["evidence"].split()
        for k, v in r.items():
            if k.startswith("wrong_"):
                o[k] = {"yes": True, "no": False}.get(v)
            elif k == "kind" or k.startswith("corrected_"):
                o[k] = v or None
        out.append(o)
    return out


def instructions(review_dir: Path, pending: int, total: int) -> str:
    return (
        f"review: {pending} of {total} issues still to judge. Fill in {review_dir / SHEET_CSV} "
        f"(or {review_dir / SHEET_JSONL}; the one you saved last is read), one row per issue; its sides are "
        "source_1/translation_1, source_2/translation_2, ... (role_k says what each is: container and rti, "
        "original and mutant); suggested_k, where given, is a translation the model can make that agrees with "
        "the other side (copy it into corrected_k when it is right):\n"
        "  wrong_1, wrong_2, ...: yes or no for each side's translation (all no: no error, a false positive)\n"
        f"  kind: when something is wrong, one of: {', '.join(KINDS)}\n"
        "  corrected_1, corrected_2, ...: the right Chinese for each translation marked yes\n"
        "Keep the CSV as UTF-8 CSV. Then run the same command again to continue."
    )


# ---------------------------------------------------------------- reading a filled sheet


def _flag(value, where: str, column: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    t = str(value).strip().lower()
    if not t:
        return None
    if t in YES:
        return True
    if t in NO:
        return False
    raise UserError(f"{where}: {column} must be yes or no, not {value!r}")


def _read_csv(path: Path) -> list[tuple[str, dict]]:
    read_text_lines(path)  # UTF-8 check that names the line
    text = path.read_bytes().decode("utf-8-sig")
    head = text.split("\n", 1)[0]
    delimiter = max(",;\t", key=head.count)  # a spreadsheet in some locales saves with ; or tabs
    if csv.field_size_limit() < FIELD_LIMIT:
        csv.field_size_limit(FIELD_LIMIT)
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    names = [LEGACY.get(c, c) for c in reader.fieldnames or []]
    missing = [c for c in ("id", "wrong_1", "kind", "corrected_1") if c not in names]
    if missing:
        raise UserError(f"{path}:1: the header lacks the column(s) {', '.join(missing)}")
    out = []
    start = 2
    rows = iter(reader)
    while True:
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as e:
            raise UserError(f"{path}:{start}: not a readable CSV row ({e}); a cell may have lost its "
                            f"closing quote, or holds more than {FIELD_LIMIT:,} characters") from None
        where = f"{path}:{start}"
        start = reader.line_num + 1
        if not any((v or "").strip() for v in row.values() if isinstance(v, str)):
            continue
        out.append((where, _legacy({k: _uncell(v) if isinstance(v, str) else v for k, v in row.items()})))
    return out


def _read_jsonl(path: Path) -> list[tuple[str, dict]]:
    out = []
    for n, row in iter_jsonl(path):
        where = f"{path}:{n}"
        if not isinstance(row, dict) or "id" not in row:
            raise UserError(f"{where}: each line must be an object with an 'id'")
        out.append((where, _legacy(row)))
    return out


def _judgment(where: str, row: dict, issue: dict):
    """(wrong, kind, corrections) for a filled row, None for a row not judged yet."""
    sides = list(enumerate(issue["sides"], 1))
    flags = {k: _flag(row.get(f"wrong_{k}"), where, f"wrong_{k}") for k, _ in sides}
    texts = {k: (row.get(f"corrected_{k}") or "").strip() for k, _ in sides}
    kind_text = str(row.get("kind") or "").strip()
    if all(v is None for v in flags.values()):
        if kind_text or any(texts[k] and texts[k] != s["translation"] for k, s in sides):
            raise UserError(f"{where}: fill {', '.join(f'wrong_{k}' for k, _ in sides)} (yes or no) "
                            f"for issue {issue['id']}")
        return None
    for k, s in sides:
        if flags[k] is None:
            raise UserError(f"{where}: wrong_{k} ({s['role']}) is empty; write yes or no")
    wrong = [(k, s) for k, s in sides if flags[k]]
    if not wrong:
        return [], None, {}
    try:
        kind = parse_kind(kind_text)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
    for k, s in wrong:
        if not texts[k]:
            raise UserError(f"{where}: wrong_{k} ({s['role']}) is yes, so corrected_{k} needs the right translation")
        if squeeze(texts[k]) == squeeze(s["translation"]):
            raise UserError(f"{where}: corrected_{k} ({s['role']}) is still the model's translation; correct it")
    return [s["role"] for _, s in wrong], kind, {s["role"]: texts[k] for k, s in wrong}


def sheet_how(issue: dict, corrections: dict[str, str]) -> dict:
    """How each correction of a sheet was made: the suggestion copied as it is, or edited from the nearer of the
    suggestion and the model's translation (the characters typed: the edit distance from it)."""
    how = {}
    for role, text in corrections.items():
        best = best_suggestion(issue, role)
        starts = [t for t in ((best or {}).get("text"), next(s["translation"] for s in issue["sides"] if s["role"] == role)) if t]
        typed = min(edit_distance(t, text) for t in starts)
        how[role] = {"origin": "suggestion" if best and squeeze(best["text"]) == squeeze(text) else
                     "typed" if typed >= len(squeeze(text)) else "edited", "typed": typed}
    return how


def _legacy(row: dict) -> dict:
    """A row of a sheet written before issues had sides, in today's columns."""
    if "container_wrong" not in row:
        return row
    return {LEGACY.get(k, k): v for k, v in row.items()}


def _edited(path: Path, pristine: str) -> bool:
    return path.exists() and path.read_bytes().decode("utf-8", "replace") != pristine


def file_review(issues: list[dict], review_dir: str | os.PathLike, rerun_hint: str | None = None,
                aligner=None) -> list[dict]:
    """First call: write the sheet and raise ReviewPending. Later calls: read it back, record, return corrections.

    A sheet that exists is not written again before its filled rows are recorded (the person may have started
    filling it); the judged rows are recorded on every call, and ReviewPending is raised while rows remain.
    `aligner` (a repair.review.align.PhraseAligner): a rerun with rows still to judge writes the sheet again, its
    judged rows as recorded, once a phrase side of a row to judge can be suggested the projection of its sentence's
    correction (suggested_k), so that a person corrects a sentence once.
    """
    from repair.review.align import ProjectedPrefills

    review_dir = Path(review_dir)
    with CorrectionStore(review_dir, issues) as store:
        return _file_review(store, issues, review_dir, rerun_hint, ProjectedPrefills(aligner, issues))


def _rewrite_with_projections(store: CorrectionStore, issues: list[dict], review_dir: Path, prefills) -> None:
    """The sheet written again from the recorded judgments where a row to judge gains a projected suggestion."""
    projected = prefills(store.prefill())
    if any(i["id"] not in store.latest and s["source"] in projected for i in issues for s in i["sides"]):
        rows = sheet_rows(issues, store.latest, projected)
        write_text_atomic(review_dir / SHEET_CSV, csv_text(rows))
        write_jsonl_atomic(review_dir / SHEET_JSONL, _jsonl_rows(rows))


def _file_review(store: CorrectionStore, issues: list[dict], review_dir: Path, rerun_hint: str | None,
                 prefills) -> list[dict]:
    csv_path, jsonl_path = review_dir / SHEET_CSV, review_dir / SHEET_JSONL
    pristine_rows = sheet_rows(issues)
    pristine_csv = csv_text(pristine_rows)
    pristine_jsonl = "".join(json_line(r) for r in _jsonl_rows(pristine_rows))
    hint = f"\nRun again: {rerun_hint}" if rerun_hint else ""
    untouched = all(not p.exists() or not _edited(p, pristine)
                    for p, pristine in ((csv_path, pristine_csv), (jsonl_path, pristine_jsonl)))
    if untouched:  # nothing of the person's in either file (or no file yet): (re)write both
        rows = sheet_rows(issues, store.latest, prefills(store.prefill()))
        write_text_atomic(csv_path, csv_text(rows))
        write_jsonl_atomic(jsonl_path, _jsonl_rows(rows))
        if len(store.latest) < len(issues):
            raise ReviewPending(instructions(review_dir, len(issues) - len(store.latest), len(issues)) + hint)

    candidates = [p for p, pristine in ((csv_path, pristine_csv), (jsonl_path, pristine_jsonl)) if _edited(p, pristine)]
    if candidates:
        source = max(candidates, key=lambda p: p.stat().st_mtime_ns)
        rows = _read_csv(source) if source.suffix == ".csv" else _read_jsonl(source)
        by_id = {i["id"]: i for i in issues}
        seen: dict[str, str] = {}
        items = []
        for where, row in rows:
            rid = str(row.get("id") or "").strip()
            if rid not in by_id:
                # A spreadsheet may have turned an id like 1234e5678901 into a number: ids are the hash
                # of the sides' sources, so the row's own texts name its issue.
                rid = issue_id([_uncell(str(row.get(f"source_{k}") or ""))
                                for k in range(1, 1 + sum(c.startswith("source_") for c in row))])
            if rid not in by_id:
                rid = str(row.get("id") or "").strip()
                raise UserError(f"{where}: id {rid!r} is not an issue of this run; the sheet belongs to another run")
            if rid in seen:
                raise UserError(f"{where}: issue {rid} appears twice (first at {seen[rid]})")
            seen[rid] = where
            j = _judgment(where, row, by_id[rid])
            if j is not None:
                items.append((rid, *j, None, sheet_how(by_id[rid], j[2])))
        lost = [i for i in by_id if i not in seen]
        if lost:
            raise UserError(
                f"{source}: rows for {len(lost)} issue(s) are missing (e.g. {', '.join(lost[:3])}); "
                "put them back (the other sheet file still has them)"
            )
        store.record_many(items)
    pending = len(issues) - len(store.latest)
    if pending and candidates:
        _rewrite_with_projections(store, issues, review_dir, prefills)
    if pending:
        raise ReviewPending(instructions(review_dir, pending, len(issues)) + hint)
    return store.corrections()
