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

    return Purity(make_parser, translators, settings, model_check=purity.get("model_check") or "stop")


def run(out: Path, model: "ModelFiles", data: Data, purity: Purity, indices: list[int] | None = None,
        suggest: dict | None = None) -> dict:
    """Purity on the input sentences at `indices` (all of them when None) into `out`: its summary and issues,
    with suggested corrections (`suggest`: the purity group's `suggest` block; verify's runs suggest nothing)."""
    if not (out / "summary.json").exists():
        sentences = read_text_lines(data.sentences)
        if indices is None:
            indices = list(range(len(sentences)))
        check_model(out, model, data, purity, [sentences[i] for i in indices])
        purity.run(out, model, [sentences[i] for i in indices], [i + 1 for i in indices], str(data.sentences),
                   suggest=suggest)
    return {"summary": read_json(out / "summary.json"), "issues": read_issues(out / "issues.jsonl")}


def check_model(out: Path, model: "ModelFiles", data: Data, purity: Purity, sentences: list[str]) -> dict:
    """The model under test checked before Purity runs (repair.purity.model_check, `purity.model_check`: stop, warn
    or off), on a sample of the sentences and of the data's cleaned validation split: a model read or written
    unlike its training stops here, naming the keys to set. Kept in out/model_check.json; a check that passed is
    not made again when the stage resumes."""
    from repair.fileio import write_json_atomic
    from repair.purity.model_check import run_model_check

    path = out / "model_check.json"
    if path.exists():
        return read_json(path)
    valid = [data.dir / "clean" / f"valid.{lang}" for lang in (model.src.lang, model.tgt.lang)]
    pairs = list(zip(*(read_text_lines(p) for p in valid))) if all(p.is_file() for p in valid) else []
    record = run_model_check(purity.translator(model), sentences, purity.model_check, key="purity.model_check",
                             valid_pairs=pairs, data_dir=data.dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, record)
    return record
