"""Test relations: each proposes cases from parsed sentences and judges their translations.

    purity.relations=[rti]            Purity's referential transparency (the default)
    purity.relations=[rti,replace]    and word replacement, on one batch of unique texts
"""

from __future__ import annotations

from typing import Mapping, Sequence

from repair.errors import UserError
from repair.registry import constructor_kwargs
from repair.purity.relations.base import Case, Check, Parsed, Relation, Role
from repair.purity.relations.replace import ReplaceRelation
from repair.purity.relations.rti import RTIRelation

RELATIONS: dict[str, type[Relation]] = {"rti": RTIRelation, "replace": ReplaceRelation}


def describe(name: str) -> dict:
    """Labels of a relation's sides for the review page and sheet (generic ones for a name not registered)."""
    cls = RELATIONS.get(name)
    if cls is not None:
        return cls.describe()
    return {"name": name, "description": "", "evidence": "Tokens behind the distance:", "roles": []}


def make_relations(names: Sequence[str] | str, shared: Mapping | None = None,
                   options: Mapping[str, Mapping] | None = None) -> list[Relation]:
    """The relations named, each built from the shared settings and its own options block (`options[name]`,
    the config's `purity.<name>.*`), checked against its class's constructor as every config group is
    (repair.registry)."""
    if isinstance(names, str):
        names = [names]
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in RELATIONS]
    if unknown or not names:
        raise UserError(f"purity.relations={list(names)}: choose one or more of {', '.join(RELATIONS)}")
    out = []
    for name in names:
        own = dict((options or {}).get(name) or {})
        constructor_kwargs(f"purity.{name}", RELATIONS[name], own)
        out.append(RELATIONS[name](**{**dict(shared or {}), **own}))
    return out


__all__ = ["Case", "Check", "Parsed", "Relation", "Role", "RELATIONS", "describe", "make_relations",
           "RTIRelation", "ReplaceRelation"]
