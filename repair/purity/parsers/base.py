"""The one interface every constituency parser backend implements."""

from __future__ import annotations

from abc import ABC, abstractmethod


class Parser(ABC):
    """Turns English sentences into constituency trees in Penn Treebank bracket notation.

    `parse` returns one bracketed tree string per input sentence, in order. The trees carry
    NP constituents that `repair.purity.rti_pairs` reads; other labels are free.
    """

    name: str = "parser"
    # where the parser ran when not in this process, and its seconds there (ParserProcess): kept in summary.json
    process: dict | None = None

    @abstractmethod
    def parse(self, sentences: list[str]) -> list[str]:
        ...
