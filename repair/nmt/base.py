"""The one interface every translator implements (the table, fairseq and CTranslate2 translators)."""

from __future__ import annotations

from abc import ABC, abstractmethod


class Translator(ABC):
    """Translates a batch of English texts into Chinese, one output per input, in order."""

    name: str = "translator"

    @abstractmethod
    def translate(self, texts: list[str]) -> list[str]:
        ...
