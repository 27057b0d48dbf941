"""Constituency parser backends behind one interface, chosen by `parser=ptb|spacy|stanza`."""

from __future__ import annotations

from typing import Any, Mapping

from repair.registry import build
from repair.purity.parsers.base import Parser

BACKENDS = {
    "ptb": "repair.purity.parsers.ptb:PtbParser",
    "spacy": "repair.purity.parsers.spacy:SpacyParser",
    "stanza": "repair.purity.parsers.stanza:StanzaParser",
}


def make_parser(cfg: Mapping[str, Any]) -> Parser:
    """A parser from its config (the rule of repair.registry): `name` picks the backend, the other keys
    are its constructor's keyword arguments. The backend's module is imported only when chosen."""
    return build("parser", BACKENDS, cfg)


__all__ = ["Parser", "make_parser", "BACKENDS"]
