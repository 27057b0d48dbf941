"""Judgments and corrections on disk: recorded as they are made, validated when read back.

review/judgments.jsonl   the record: one line per judgment, appended and fsynced before a save is acknowledged;
                         the latest line of an issue wins.
review/corrections.jsonl derived from the latest judgments, one line per (source, correction), rewritten
                         atomically after every judgment, so a judgment revised to "no error" withdraws its
                         correction and a reader never sees half a file. Rebuilt from the log whenever a store
                         opens the folder (server start, a rerun of the review stage, the loop reading the
                         review) if it is older than the log and disagrees with it (a crash between the two writes).
                         A store keeps the corrections and their lines as it records: a new judgment is folded
                         into them, not rebuilt from every judgment (a judgment revised is: it may withdraw
                         corrections), and the file is not read back while it is as the store wrote it.
review/progress.json     judged n of N and the precision so far, for a person and for `review_stats`.
review/.writer.lock      held (flock) by the one process that may write the folder while its store is open.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import unicodedata
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from repair.errors import UserError
from repair.issues import roles, side
from repair.stats import squeeze
from repair.fileio import (FolderLock, append_jsonl, drop_torn_tail, iter_jsonl, json_line, read_json,
                           remove_temp_files, write_json_atomic, write_text_atomic)

log = logging.getLogger(__name__)

# The paper's five kinds of translation error, in its order.
KINDS = (
    "under-translation",
    "over-translation",
    "word/phrase mistranslation",
    "incorrect modification",
    "unclear logic",
)
CORRECTION_KEYS = ("source", "translation", "correction", "kind", "issues")
# How a correction was made: a suggestion taken as it is, a pre-filled text (suggestion, earlier correction or the
# model's translation) edited, or typed into an empty box; with the characters typed (inserted or deleted).
ORIGINS = ("suggestion", "edited", "typed")

JUDGMENTS = "judgments.jsonl"
CORRECTIONS = "corrections.jsonl"
PROGRESS = "progress.json"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def parse_kind(text: Any) -> str:
    """The canonical kind for a name, case and spacing aside, or a unique prefix of 3+ letters ("under")."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"no kind given; use one of: {', '.join(KINDS)}")
    t = " ".join(text.strip().lower().replace("_", " ").split())
    for k in KINDS:
        if t == k or t == k.replace("-", " "):
            return k
    matches = [k for k in KINDS if len(t) >= 3 and k.startswith(t)]
    if len(matches) == 1:
        return matches[0]
    raise ValueError(f"unknown kind {text!r}; use one of: {', '.join(KINDS)}")


def check_how(how: Any, wrong: list[str], where: str) -> dict:
    """{role: {"origin": one of ORIGINS, "typed": characters}} for wrong sides; anything else is refused."""
    if how is None:
        return {}
    if not isinstance(how, dict):
        raise UserError(f"{where}: 'how' must map a wrong side to {{\"origin\", \"typed\"}}")
    out = {}
    for role, h in how.items():
        if role not in wrong:
            continue
        if (not isinstance(h, dict) or h.get("origin") not in ORIGINS or not isinstance(h.get("typed"), int)
                or isinstance(h.get("typed"), bool) or h["typed"] < 0):
            raise UserError(f"{where}: how the {role} correction was made must be {{\"origin\": one of "
                            f"{', '.join(ORIGINS)}, \"typed\": characters typed (0 or more)}}")
        out[role] = {"origin": h["origin"], "typed": h["typed"]}
        ref = h.get("reference")
        if ref is not None:  # where the oracle's reference came from: a projection of its sentence's reference
            if (not isinstance(ref, dict) or ref.get("from") != "projection"
                    or not isinstance(ref.get("confidence"), (int, float)) or isinstance(ref.get("confidence"), bool)):
                raise UserError(f"{where}: the reference of the {role} correction must be {{\"from\": \"projection\", "
                                f"\"confidence\": a number}}")
            out[role]["reference"] = {"from": "projection", "confidence": float(ref["confidence"])}
    return out


CONTROL_NAMES = {"\n": "LINE FEED", "\r": "CARRIAGE RETURN", "\x85": "NEXT LINE", "\x0b": "LINE TABULATION",
                 "\x0c": "FORM FEED", "\x1c": "FILE SEPARATOR", "\x1d": "GROUP SEPARATOR", "\x1e": "RECORD SEPARATOR",
                 "\x00": "NULL", "\x1b": "ESCAPE"}
LINE_BREAK_CONTROLS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85"  # the controls str.splitlines breaks at


def line_trouble(text: str) -> str | None:
    """Why `text` cannot be one translation (a line break or a control character, named with its place), or None.

    A corrected translation becomes one line of a parallel corpus; a line or paragraph separator pasted from a
    web page or a PDF, or an invisible control character, would be cut or dropped on the way to fine-tuning.
    """
    for n, ch in enumerate(text, 1):
        cat = unicodedata.category(ch)
        if cat in ("Zl", "Zp") or (cat == "Cc" and ch != "\t") or cat == "Cs":
            name = unicodedata.name(ch, CONTROL_NAMES.get(ch, "a lone surrogate" if cat == "Cs" else "a control character"))
            what = "a line break" if cat in ("Zl", "Zp") or ch in LINE_BREAK_CONTROLS else \
                "a broken character" if cat == "Cs" else "a control character"
            return f"contains {what} (U+{ord(ch):04X} {name}) at character {n}; a translation is one line: remove it"
    return None


# ---------------------------------------------------------------- the judgment log


def _check_judgment(j: Any, where: str) -> dict:
    if not isinstance(j, dict):
        raise UserError(f"{where}: a judgment must be a JSON object")
    missing = [k for k in ("issue", "wrong", "kind", "corrections") if k not in j]
    if missing:
        raise UserError(f"{where}: judgment lacks {', '.join(missing)}")
    if not isinstance(j["issue"], str) or not j["issue"]:
        raise UserError(f"{where}: 'issue' must be an issue id")
    wrong = j["wrong"]
    if not isinstance(wrong, list) or any(not isinstance(w, str) or not w for w in wrong) or len(set(wrong)) != len(wrong):
        raise UserError(f"{where}: 'wrong' must be a list of distinct side roles (e.g. 'container', 'rti'), got {wrong!r}")
    if wrong:
        try:
            parse_kind(j["kind"])
        except ValueError as e:
            raise UserError(f"{where}: {e}") from None
    corr = j["corrections"]
    if not isinstance(corr, dict) or any(not isinstance(corr.get(w), str) or not corr[w].strip() for w in wrong):
        raise UserError(f"{where}: 'corrections' must give a corrected translation for each wrong side {wrong}")
    check_how(j.get("how"), wrong, where)
    return j


def read_judgments(review_dir: str | os.PathLike) -> dict[str, dict]:
    """Latest judgment per issue id, ordered by when it was made (oldest first)."""
    path = Path(review_dir) / JUDGMENTS
    latest: dict[str, dict] = {}
    if not path.exists():
        return latest
    for n, j in iter_jsonl(path, skip_torn_tail=True):
        _check_judgment(j, f"{path}:{n}")
        latest.pop(j["issue"], None)
        latest[j["issue"]] = j
    return latest


def _same(a: dict, b: dict) -> bool:
    keys = ("wrong", "kind", "kinds", "corrections")
    return all(a.get(k) == b.get(k) for k in keys)


def _stats(latest: dict[str, dict], total: int | None) -> dict:
    judged = len(latest)
    with_error = sum(1 for j in latest.values() if j["wrong"])
    return {
        "judged": judged,
        "with_error": with_error,
        "precision": (with_error / judged) if judged else None,
        "total": total,
    }


class CorrectionStore:
    """The review folder of one run: record judgments, keep corrections in step with them.

    `issues` (the issue records under review) is needed to record: corrections carry the source texts
    and the model's translations.
    """

    def __init__(self, review_dir: str | os.PathLike, issues: Iterable[dict] | None = None):
        self.dir = Path(review_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.judgments_path = self.dir / JUDGMENTS
        self.corrections_path = self.dir / CORRECTIONS
        self.progress_path = self.dir / PROGRESS
        self.issues: dict[str, dict] | None = \
            {i["id"]: i for i in issues} if issues is not None else None
        self.lock = FolderLock(self.dir, "review folder").acquire()
        try:
            if drop_torn_tail(self.judgments_path):
                log.warning("%s: dropped an unfinished last line (written when a run was killed)", self.judgments_path)
            for p in remove_temp_files(self.dir):
                log.info("removed %s, left by a write that was killed", p)
            self._lines: dict[tuple[str, str], str] = {}  # a correction's JSONL line, by (source, corrected text)
            self._load(warn=True)
            self._corrections_seen: str | None = None
            self._corrections_state: tuple | None = None  # corrections.jsonl's state when it was _corrections_seen
            if self.issues is not None:
                self.sync()
        except BaseException:
            self.lock.release()
            raise

    def _load(self, warn: bool = False) -> None:
        latest = read_judgments(self.dir)
        self._log_state = _file_state(self.judgments_path)
        if self.issues is not None:
            stray = [i for i in latest if i not in self.issues]
            if stray and warn:
                log.warning(
                    "%s: %d judgment(s) name issues this run does not have (e.g. %s); they are kept in the log "
                    "and left out of corrections and figures",
                    self.judgments_path, len(stray), ", ".join(stray[:3]),
                )
            latest = {k: v for k, v in latest.items() if k in self.issues}
        self.latest = latest
        self._groups: dict[tuple[str, str], dict] | None = None  # the corrections, made from `latest` when needed

    def close(self) -> None:
        """Let another process write the folder."""
        self.lock.release()

    def __enter__(self) -> "CorrectionStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading

    def judgment(self, issue_id: str) -> dict | None:
        return self.latest.get(issue_id)

    def stats(self) -> dict:
        return _stats(self.latest, len(self.issues) if self.issues is not None else None)

    def corrections(self) -> list[dict]:
        """One correction per (source, corrected text), all issue ids that gave it, latest last."""
        return [{**g, "issues": list(g["issues"])} for g in self._correction_groups().values()]

    def prefill(self, sources: Iterable[str] | None = None) -> dict[str, str | None]:
        """What the page pre-fills a source's edit box with, its latest correction: {source: correction} of every
        source corrected; or, for `sources`, {source: its latest correction, or None where it has none}."""
        if sources is None:
            return {source: fixed for source, fixed in self._correction_groups()}
        out: dict[str, str | None] = dict.fromkeys(sources)
        left = set(out)
        for source, fixed in reversed(self._correction_groups()):
            if source in left:
                out[source] = fixed
                left.discard(source)
                if not left:
                    break
        return out

    def _correction_groups(self) -> dict[tuple[str, str], dict]:
        if self.issues is None:
            raise ValueError("CorrectionStore needs the issues to build corrections")
        if self._groups is None:
            self._groups = {}
            self._lines.clear()
            for issue_id, j in self.latest.items():
                self._fold(issue_id, j)
        return self._groups

    def _fold(self, issue_id: str, j: dict) -> None:
        """Judgment `j` of `issue_id`, the latest one made, into the corrections (each one's line made anew)."""
        groups, issue = self._groups, self.issues[issue_id]
        kinds = j.get("kinds") or {}
        how = j.get("how") or {}
        for role in j["wrong"]:
            s = side(issue, role)
            source, fixed = s["source"], j["corrections"][role]
            g = groups.pop((source, fixed), None) or {
                "source": source,
                "translation": s["translation"],
                "correction": fixed,
                "issues": [],
            }
            g["kind"] = parse_kind(kinds.get(role) or j["kind"])
            if issue_id not in g["issues"]:
                g["issues"].append(issue_id)
            g["time"] = j["time"]
            if role in how and "origin" not in g:  # how it was made the first time; later issues reuse it
                g.update(how[role])
            groups[(source, fixed)] = {k: g[k] for k in (*CORRECTION_KEYS, "origin", "typed", "reference", "time") if k in g}
            self._lines.pop((source, fixed), None)

    # -- writing

    def record(self, issue_id: str, wrong: Iterable[str], kind: str | None = None,
               corrections: dict[str, str] | None = None, kinds: dict[str, str] | None = None,
               how: dict[str, dict] | None = None) -> dict:
        """Judge one issue (empty `wrong`: no error, a false positive); on disk when this returns. `how`: per
        wrong side, how its correction was made ({"origin": suggestion|edited|typed, "typed": characters})."""
        return self.record_many([(issue_id, wrong, kind, corrections, kinds, how)])[0]

    def record_many(self, items: Iterable[tuple]) -> list[dict]:
        """Judge several issues, rewriting corrections once; a judgment equal to the latest is not repeated.
        Each item: (issue id, wrong, kind, corrections, kinds[, how]).

        Each judgment is on disk (fsynced in the log) before the next is made and before this returns.
        """
        if self.issues is None:
            raise ValueError("CorrectionStore needs the issues to record judgments")
        if _file_state(self.judgments_path) != self._log_state:
            self._load()  # another store of this process wrote the log since: start from what it holds
            if self.corrections_path.exists():
                state = _file_state(self.corrections_path)
                current = self.corrections_path.read_bytes().decode("utf-8", "replace")
                if current == self._corrections_text():
                    self._corrections_seen = current  # and kept corrections.jsonl in step with it
                    self._corrections_state = state
        made = []
        try:
            for issue_id, wrong, kind, corrections, kinds, *how in items:
                j = self._judgment(issue_id, wrong, kind, corrections, kinds, how[0] if how else None)
                old = self.latest.get(issue_id)
                if old is not None and _same(old, j):
                    made.append(old)
                    continue
                append_jsonl(self.judgments_path, j)
                self.latest.pop(issue_id, None)
                self.latest[issue_id] = j
                if old is not None and old["wrong"]:
                    self._groups = None  # a judgment revised may withdraw corrections: made again from `latest`
                elif self._groups is not None:
                    self._fold(issue_id, j)
                made.append(j)
        finally:
            self._log_state = _file_state(self.judgments_path)
            if made:
                self.sync()
        return made

    def _judgment(self, issue_id, wrong, kind, corrections, kinds, how=None) -> dict:
        if issue_id not in self.issues:
            raise UserError(f"no issue with id {issue_id!r} in this review")
        issue = self.issues[issue_id]
        names = roles(issue)
        given = set(wrong)
        extra = given - set(names)
        wrong = [r for r in names if r in given]
        if extra:
            raise UserError(f"issue {issue_id}: 'wrong' may hold only {' / '.join(names)}, not {sorted(extra)}")
        corrections = corrections or {}
        kinds = {s: parse_kind(k) for s, k in (kinds or {}).items() if s in wrong and k}
        kept = {}
        for role in wrong:
            text = (corrections.get(role) or "").strip()
            if not text:
                raise UserError(f"issue {issue_id}: the {role} translation is marked wrong but has no correction")
            trouble = line_trouble(text)
            if trouble:
                raise UserError(f"issue {issue_id}: the corrected {role} translation {trouble}")
            if squeeze(text) == squeeze(side(issue, role)["translation"]):
                raise UserError(
                    f"issue {issue_id}: the corrected {role} translation is still the model's translation"
                )
            kept[role] = text
        if wrong:
            try:
                kind = parse_kind(kind or kinds.get(wrong[0]))
            except ValueError as e:
                raise UserError(f"issue {issue_id}: {e}") from None
        else:
            kind = None
        j = {"issue": issue_id, "wrong": wrong, "kind": kind, "corrections": kept, "time": now_iso()}
        if kinds and any(k != kind for k in kinds.values()):
            j["kinds"] = kinds
        how = check_how(how, wrong, f"issue {issue_id}")
        if how:
            j["how"] = how
        return j

    def _corrections_text(self) -> str:
        lines = self._lines
        for key, g in self._correction_groups().items():
            if key not in lines:
                lines[key] = json_line(g)
        return "".join(lines[key] for key in self._groups)

    def sync(self) -> None:
        """Make corrections.jsonl and progress.json agree with the judgment log, the one record.

        A corrections file that differs from what this store last saw of it, or (when the store has just opened)
        is newer than the log, was edited by hand: that version is kept beside it as
        corrections.edited-<hash>.jsonl before it is rebuilt. One older than the log is a crash's leftover.
        """
        new = self._corrections_text()
        path = self.corrections_path
        state = _file_state(path)
        if state is not None:
            if self._corrections_seen is not None and state == self._corrections_state:
                current = self._corrections_seen  # as this store left it: not read again
            else:
                current = path.read_bytes().decode("utf-8", "replace")
            if current != new:
                if self._corrections_seen is not None:
                    by_hand = current != self._corrections_seen
                else:
                    log_time = self.judgments_path.stat().st_mtime_ns if self.judgments_path.exists() else -1
                    by_hand = path.stat().st_mtime_ns > log_time
                if by_hand and current.strip():
                    digest = hashlib.sha256(current.encode("utf-8")).hexdigest()[:12]
                    aside = self.dir / f"corrections.edited-{digest}.jsonl"
                    if not aside.exists():
                        write_text_atomic(aside, current)
                    log.warning("%s was edited by hand; that version is kept as %s and the file is rebuilt from "
                                "%s", path, aside, self.judgments_path)
                write_text_atomic(path, new)
        elif self.judgments_path.exists():
            write_text_atomic(path, new)
        self._corrections_seen = new
        self._corrections_state = _file_state(path)
        stats = self.stats()
        old = _read_progress(self.progress_path)
        if self.judgments_path.exists() and any(old.get(k) != v for k, v in stats.items()):
            write_json_atomic(self.progress_path, {**old, **stats, "time": now_iso()})


def _file_state(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _read_progress(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        obj = read_json(path)
    except UserError:
        return {}  # derived: rebuilt from the log
    return obj if isinstance(obj, dict) else {}


def review_stats(review_dir: str | os.PathLike, issues: Iterable[dict] | None = None) -> dict:
    """{"judged", "with_error", "precision" (with_error / judged, or None), "total"} from the judgment log.

    `total` is the number of issues under review: from `issues` when given, else from progress.json.
    """
    review_dir = Path(review_dir)
    latest = read_judgments(review_dir)
    total = None
    if issues is not None:
        ids = {i["id"] for i in issues}
        latest = {k: v for k, v in latest.items() if k in ids}
        total = len(ids)
    else:
        total = _read_progress(review_dir / PROGRESS).get("total")
    return _stats(latest, total)


# ---------------------------------------------------------------- corrections, read back


def load_corrections(path: str | os.PathLike, issues_by_id: dict[str, dict] | None = None,
                     allow_empty: bool = False) -> tuple[list[dict], dict]:
    """Validated corrections and notes about what was merged.

    A bad line raises UserError naming file and line; ids not among `issues_by_id` raise UserError naming
    them. Identical lines count once. A source corrected more than once keeps its latest correction (the
    last line), with the issue ids of all its lines; notes["superseded"] says which sources, in words.
    """
    path = Path(path)
    rows: list[tuple[int, dict]] = []
    for n, c in iter_jsonl(path):
        where = f"{path}:{n}"
        if not isinstance(c, dict):
            raise UserError(f"{where}: a correction must be a JSON object with {', '.join(CORRECTION_KEYS)}")
        missing = [k for k in CORRECTION_KEYS if k not in c]
        if missing:
            raise UserError(f"{where}: correction lacks {', '.join(missing)}")
        for k in ("source", "correction"):
            if not isinstance(c[k], str) or not c[k].strip():
                raise UserError(f"{where}: '{k}' must be a non-empty text")
        if not isinstance(c["translation"], str):  # the model's, which may be empty (it translated nothing)
            raise UserError(f"{where}: 'translation' must be a text")
        trouble = line_trouble(c["correction"])
        if trouble:
            raise UserError(f"{where}: the correction {trouble}")
        try:
            c["kind"] = parse_kind(c["kind"])
        except ValueError as e:
            raise UserError(f"{where}: {e}") from None
        if isinstance(c["issues"], str):
            c["issues"] = [c["issues"]]
        if not isinstance(c["issues"], list) or not all(isinstance(i, str) and i for i in c["issues"]):
            raise UserError(f"{where}: 'issues' must be a list of issue ids")
        rows.append((n, c))
    if not rows and not allow_empty:
        raise UserError(
            f"{path}: no corrections in it (the file is empty); the review recorded no erroneous translation, "
            "so there is nothing to fine-tune on"
        )
    if issues_by_id is not None:
        unknown: dict[str, list[int]] = {}
        for n, c in rows:
            for i in c["issues"]:
                if i not in issues_by_id:
                    unknown.setdefault(i, []).append(n)
        if unknown:
            shown = "; ".join(f"{i} (line {', '.join(map(str, ns))})" for i, ns in list(unknown.items())[:10])
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            raise UserError(f"{path}: corrections name issues this run does not have: {shown}{more}")

    by_source: dict[str, dict] = {}
    lines_of: dict[str, list[int]] = {}
    texts_of: dict[str, list[str]] = {}
    seen = Counter()
    duplicates = 0
    for n, c in rows:
        key = json.dumps([c[k] for k in CORRECTION_KEYS], ensure_ascii=False)
        seen[key] += 1
        if seen[key] > 1:
            duplicates += 1
            continue
        src = c["source"]
        lines_of.setdefault(src, []).append(n)
        if c["correction"] not in texts_of.setdefault(src, []):
            texts_of[src].append(c["correction"])
        ids = by_source[src]["issues"] if src in by_source else []
        merged = {**c, "issues": ids + [i for i in c["issues"] if i not in ids]}
        by_source[src] = merged
    superseded = []
    for src, texts in texts_of.items():
        if len(texts) > 1:
            kept = by_source[src]["correction"]
            dropped = [t for t in texts if t != kept]
            superseded.append(
                f"“{src}”: kept “{kept}” (line {lines_of[src][-1]}), replaced "
                + ", ".join(f"“{t}”" for t in dropped)
            )
    return list(by_source.values()), {"superseded": superseded, "duplicates": duplicates}
