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


@dataclass
class Purity:
    """What a Purity run needs besides its sentences: the parser and a translator per model, each built on
    first use, and run_purity's settings (the `purity` config group's)."""

    parser: Callable[[], Any]
    translator: Callable[["ModelFiles"], "Translator"]
    settings: dict

    def run(self, out: Path, model: "ModelFiles", sentences: list[str], lines: list[int], source: str,
            **options: Any) -> Path:
        """Purity on `sentences` (their `lines` in `source`) into `out`, unless a run there finished; `options`:
        run_purity's besides the settings (the test stage's `suggest`)."""
        from repair.purity.run import run_purity

        if not (out / "summary.json").exists():
            start = time.perf_counter()
            parser, translator = self.parser(), self.translator(model)
            run_purity(sentences, parser, translator, out, init_seconds=time.perf_counter() - start, source=source,
                       lines=lines, **self.settings, **options)
        return out
