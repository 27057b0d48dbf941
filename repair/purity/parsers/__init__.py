"""Constituency parser backends behind one interface, chosen by `parser=ptb|spacy|stanza`."""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from repair.errors import UserError
from repair.purity.parsers.base import Parser

BACKENDS = {
    "ptb": ("repair.purity.parsers.ptb", "PtbParser"),
    "spacy": ("repair.purity.parsers.spacy", "SpacyParser"),
    "stanza": ("repair.purity.parsers.stanza", "StanzaParser"),
}


def make_parser(cfg: Mapping[str, Any]) -> Parser:
    """A parser from its config: `name` picks the backend, the other keys are its constructor's
    keyword arguments. The backend's module is imported only when chosen."""
    from repair.purity.translators import constructor_kwargs, split_config

    name, options = split_config(cfg)
    if name not in BACKENDS:
        raise UserError(f"unknown parser {name!r}; choose one of {', '.join(BACKENDS)}")
    module, cls_name = BACKENDS[name]
    cls = getattr(importlib.import_module(module), cls_name)
    return cls(**constructor_kwargs(f"parser={name}", cls, options))


__all__ = ["Parser", "make_parser", "BACKENDS"]
