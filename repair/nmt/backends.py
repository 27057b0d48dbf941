"""The `translator` config group: its name picks a translator class, its other keys go to the class
(the one rule of repair.registry). Purity's CLI, the loop's stages and the benchmarks build here."""

from __future__ import annotations

from typing import Any, Mapping

from repair.nmt.base import Translator
from repair.purity.translators import TableTranslator
from repair.registry import build

TRANSLATORS = {
    "table": TableTranslator,
    "fairseq": "repair.nmt.translator:FairseqTranslator",
    "ctranslate2": "repair.nmt.ct2:CTranslate2Translator",
}


def make_translator(cfg: Mapping[str, Any], **overrides: Any) -> Translator:
    """A translator from its config group's plain values, with `overrides` (a checkpoint, resolved
    model files) in the place of the config's keys."""
    return build("translator", TRANSLATORS, cfg, **overrides)
