"""The loop's stages below its entry point (repair.loop): plain values in, files in the run folder out."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from repair.nmt.base import Translator
    from repair.nmt.preprocessing import ModelFiles


@dataclass
class Data:
    dir: Path
    sentences: Path  # English sentences Purity tests
    references: Path | None  # oracle references for every sentence and NP (demo only)

    @cached_property
    def reference_table(self) -> dict[str, str] | None:
        """The references, read once per run (None when the data has none)."""
        if self.references is None:
            return None
        from repair.data.demo import load_references

        return load_references(self.references)

    @cached_property
    def sentence_references(self) -> dict[str, str] | None:
        """References for the sentences Purity tests: the data's reference table (the demo's), else the
        Chinese file aligned with the input (X.zh beside X.en, line by line: a parallel corpus's test split,
        WMT'18's newstest), else None."""
        if self.references is not None:
            return self.reference_table
        zh = self.sentences.with_suffix(".zh") if self.sentences.suffix == ".en" else None
        if zh is None or not zh.is_file():
            return None
        from repair.fileio import read_text_lines

        en_lines, zh_lines = read_text_lines(self.sentences), read_text_lines(zh)
        if len(en_lines) != len(zh_lines):
            return None
        return {" ".join(e.split()): " ".join(z.split()) for e, z in zip(en_lines, zh_lines) if e.strip() and z.strip()}


@dataclass
class Purity:
    """What a Purity run needs besides its sentences: the parser and a translator per model, each built on
    first use, and run_purity's settings (the `purity` config group's)."""

    parser: Callable[[], Any]
    translator: Callable[["ModelFiles"], "Translator"]
    settings: dict

    def run(self, out: Path, model: "ModelFiles", sentences: list[str], lines: list[int], source: str) -> Path:
        """Purity on `sentences` (their `lines` in `source`) into `out`, unless a run there finished."""
        from repair.purity.run import run_purity

        if not (out / "summary.json").exists():
            start = time.perf_counter()
            parser, translator = self.parser(), self.translator(model)
            run_purity(sentences, parser, translator, out, init_seconds=time.perf_counter() - start, source=source,
                       lines=lines, **self.settings)
        return out
