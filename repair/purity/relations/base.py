"""The interface of a test relation: from parsed sentences it proposes cases (texts to translate, each side
with its role), and from their translations it gives each case a distance and the tokens behind it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Mapping, Sequence

from repair.issues import issue_id


@dataclass(frozen=True)
class Role:
    """One side of a case, as a person sees it: `key` toggles it on the review page."""

    name: str
    label: str
    sub: str
    key: str


@dataclass(frozen=True)
class Parsed:
    """A sentence under test: where it comes from, its text and its constituency tree."""

    where: str   # file:line, for messages
    sentence: str
    tree: str


@dataclass(frozen=True)
class Case:
    """Texts whose translations a relation compares. `sides` are (role, source) a person judges; `texts` all
    the texts to translate (the sides' sources first, then any the relation needs besides them)."""

    relation: str
    sentence: str
    sides: tuple[tuple[str, str], ...]
    texts: tuple[str, ...]
    info: Mapping = field(default_factory=dict)

    @property
    def id(self) -> str:
        return issue_id([source for _, source in self.sides])


@dataclass(frozen=True)
class Check:
    """A case's distance and the tokens behind it (the issue's `evidence`)."""

    distance: int
    evidence: tuple[str, ...] = ()


class Relation(ABC):
    """A metamorphic relation between translations. Subclasses set `name`, `roles` and `evidence_label`."""

    name: ClassVar[str]
    roles: ClassVar[tuple[Role, ...]]
    evidence_label: ClassVar[str]
    description: ClassVar[str]

    @abstractmethod
    def cases(self, parsed: Sequence[Parsed]) -> list[Case]:
        """Every case the sentences give, each once, in sentence order."""

    @abstractmethod
    def check(self, case: Case, translation: Mapping[str, str]) -> Check:
        """The distance of one case, given the translation of every text in `case.texts`."""

    def counts(self) -> dict:
        """Figures of the last `cases` call for the summary (e.g. how many RTIs)."""
        return {}

    @classmethod
    def describe(cls) -> dict:
        """What the review page and sheet show of this relation."""
        return {"name": cls.name, "description": cls.description, "evidence": cls.evidence_label,
                "roles": [{"role": r.name, "label": r.label, "sub": r.sub, "key": r.key} for r in cls.roles]}
