"""Issue records: what a test relation reports, in one shape for every relation.

    {"id", "relation", "distance", "sentence", "sides": [{"role", "source", "translation"}, ...], "evidence"}

`sides` are the texts a person judges (each role once per issue); `evidence` the tokens that made the
distance (for RTI the tokens of the RTI's translation missing from the container's). The test stage adds
`suggestions: [{"role", "text", "origin", "score"}, ...]`, best first: translations of a side the model can
produce that make the pair consistent (repair.purity.suggest); a record without them has none. Review, fine-tuning,
verification and the report read only these keys. Records written before relations were objects
(`container`, `container_translation`, `rti`, `rti_translation`, `missing`) are read as RTI issues.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable, Sequence

from repair.errors import UserError
from repair.fileio import iter_jsonl

SIDE_KEYS = ("role", "source", "translation")
SUGGESTION_KEYS = ("role", "text", "origin", "score")
_OLD_RTI_KEYS = ("container", "container_translation", "rti", "rti_translation")


def issue_id(sources: Sequence[str]) -> str:
    """12 hex characters, the same for the same texts (in order) in every run.

    For RTI the sources are (container, RTI): ids made before relations were objects stay valid.
    """
    return hashlib.sha1("\t".join(sources).encode("utf-8")).hexdigest()[:12]


def make_issue(relation: str, sentence: str, sides: Iterable[tuple[str, str, str]], distance: int,
               evidence: Sequence[str] = (), **extra) -> dict:
    """An issue record from (role, source, translation) per side."""
    sides = [{"role": r, "source": s, "translation": t} for r, s, t in sides]
    return {"id": issue_id([s["source"] for s in sides]), "relation": relation, "distance": distance,
            "sentence": sentence, "sides": sides, "evidence": list(evidence), **extra}


def upgrade(record: dict) -> dict:
    """A record in today's shape: an old RTI record gets `relation`, `sides` and `evidence`."""
    if "sides" in record or not all(k in record for k in _OLD_RTI_KEYS):
        return record
    out = {k: v for k, v in record.items() if k not in (*_OLD_RTI_KEYS, "missing")}
    out.setdefault("relation", "rti")
    out["sides"] = [{"role": "container", "source": record["container"], "translation": record["container_translation"]},
                    {"role": "rti", "source": record["rti"], "translation": record["rti_translation"]}]
    out["evidence"] = list(record.get("missing") or [])
    out.setdefault("id", issue_id([record["container"], record["rti"]]))
    out.setdefault("sentence", record["container"])
    return out


def check_issue(obj, where: str) -> dict:
    """The record upgraded and validated; UserError naming `where` (file:line) when it is not an issue."""
    if not isinstance(obj, dict):
        raise UserError(f"{where}: an issue must be a JSON object")
    obj = upgrade(obj)
    if not isinstance(obj.get("id"), str) or not obj["id"]:
        raise UserError(f"{where}: issue lacks an 'id'")
    sides = obj.get("sides")
    if not isinstance(sides, list) or not sides:
        raise UserError(f"{where}: issue {obj['id']} lacks 'sides' (a list of {{\"role\", \"source\", \"translation\"}})")
    for n, s in enumerate(sides, 1):
        if not isinstance(s, dict) or any(not isinstance(s.get(k), str) for k in SIDE_KEYS):
            raise UserError(f"{where}: issue {obj['id']}: side {n} must have the texts {', '.join(SIDE_KEYS)}")
    names = [s["role"] for s in sides]
    if len(set(names)) != len(names) or not all(names):
        raise UserError(f"{where}: issue {obj['id']}: each side needs its own role, got {names}")
    suggestions = obj.setdefault("suggestions", [])
    if not isinstance(suggestions, list) or any(
            not isinstance(x, dict) or x.get("role") not in names or not isinstance(x.get("text"), str)
            or not isinstance(x.get("origin"), str) or not isinstance(x.get("score"), (int, float)) for x in suggestions):
        raise UserError(f"{where}: issue {obj['id']}: 'suggestions' must be a list of {{\"role\" (one of {', '.join(names)}), "
                        f"\"text\", \"origin\", \"score\"}}")
    obj.setdefault("relation", "rti")
    obj.setdefault("evidence", [])
    obj.setdefault("sentence", sides[0]["source"])
    return obj


def read_issues(path: str | Path) -> list[dict]:
    """issues.jsonl, each record upgraded and checked."""
    return [check_issue(obj, f"{path}:{n}") for n, obj in iter_jsonl(path)]


def roles(issue: dict) -> list[str]:
    return [s["role"] for s in issue["sides"]]


def side(issue: dict, role: str) -> dict:
    for s in issue["sides"]:
        if s["role"] == role:
            return s
    raise KeyError(f"issue {issue.get('id')} has no side {role!r}")


def best_suggestion(issue: dict, role: str) -> dict | None:
    """The issue's best suggestion for side `role` (the first of its role), or None."""
    return next((x for x in issue.get("suggestions") or () if x.get("role") == role), None)


def sources(issue: dict) -> list[str]:
    return [s["source"] for s in issue["sides"]]
