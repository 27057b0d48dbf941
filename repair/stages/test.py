"""The test stage: Purity on the sentences a cycle tests, with the model under test."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from repair.fileio import read_json, read_text_lines
from repair.issues import read_issues
from repair.stages import Data, Purity, Translators

if TYPE_CHECKING:
    from repair.nmt.preprocessing import ModelFiles


def make_purity(purity: dict, parser: dict, translators: Translators, data_dir: Path | None = None) -> Purity:
    """Purity runs with the `parser` group's parser (built on first use), the loop's translators and
    the `purity` group's settings. The replacement relation reads the data's lexicon (the demo writes
    one) and its cleaned training English unless the group gives others."""
    from repair.purity.config import run_settings

    settings = run_settings(purity)
    replace = settings["relation_options"].get("replace")
    if replace is not None and data_dir is not None:
        if not replace.get("lexicon") and (data_dir / "lexicon.jsonl").is_file():
            replace["lexicon"] = str(data_dir / "lexicon.jsonl")
        if not replace.get("corpus") and (data_dir / "clean" / "train.en").is_file():
            replace["corpus"] = str(data_dir / "clean" / "train.en")
    built = []

    def make_parser():
        if not built:
            from repair.purity.parsers import make_parser

            built.append(make_parser(parser))
        return built[0]

    return Purity(make_parser, translators, settings)


def run(out: Path, model: "ModelFiles", data: Data, purity: Purity, indices: list[int] | None = None) -> dict:
    """Purity on the input sentences at `indices` (all of them when None) into `out`: its summary and issues."""
    if not (out / "summary.json").exists():
        sentences = read_text_lines(data.sentences)
        if indices is None:
            indices = list(range(len(sentences)))
        purity.run(out, model, [sentences[i] for i in indices], [i + 1 for i in indices], str(data.sentences))
    return {"summary": read_json(out / "summary.json"), "issues": read_issues(out / "issues.jsonl")}
