"""Purity's view of a translator (repair.face.Translator), the table of recorded translations
(`translator=table`), and `make_translator`: the table, or the translator of the model family the
`translator` group chooses (repair.face)."""

from __future__ import annotations

import logging
from pathlib import Path

from repair.errors import UserError
from repair.face import Translator

log = logging.getLogger(__name__)


def fidelity_line(fidelity: dict) -> str:
    """A translator's fidelity record in words: the compute type, how it was chosen, its agreement with the model's
    own translator (fairseq's, or for a transformers folder the transformers translator's)."""
    if not fidelity.get("checked"):
        return f"compute type {fidelity['compute_type']}: fidelity unchecked"
    against = fidelity.get("against", "fairseq")  # the model's own translator: fairseq, or transformers
    return (f"compute type {fidelity['compute_type']} ({fidelity['chosen']}): {fidelity['identical']:.1%} of "
            f"{fidelity['sample']} sample translations identical to {against}'s, "
            f"BLEU {fidelity['bleu_vs_fairseq']:.1f} "
            f"against them")


class MissingTranslations(UserError):
    """Some texts have no translation yet; `missing` lists them, in the order asked."""

    def __init__(self, message: str, missing: list[str]):
        super().__init__(message)
        self.missing = missing


def read_table(path: str | Path, empty_ok: bool = False) -> dict[str, str]:
    """`source<TAB>translation` rows of a UTF-8 TSV; blank lines are skipped, a bad row is
    named by its line. An empty translation is such a row unless `empty_ok` (a model's own output)."""
    from repair.fileio import read_text_lines

    table: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, line in enumerate(read_text_lines(path), 1):
        if not line.strip():
            continue
        if "\t" not in line:
            raise UserError(f"{path}:{number}: no tab in this row; each row is source<TAB>translation")
        source, translation = line.split("\t", 1)
        source, translation = source.strip(), translation.strip()
        if "\t" in translation:
            raise UserError(f"{path}:{number}: more than one tab in this row; each row is source<TAB>translation")
        if not source:
            raise UserError(f"{path}:{number}: empty source text before the tab")
        if not translation and not empty_ok:
            raise UserError(f"{path}:{number}: empty translation after the tab for {source!r}; translate it or "
                            "remove the row (a text without a row is listed in to_translate.txt)")
        if source in table and table[source] != translation:
            raise UserError(f"{path}:{number}: {source!r} has a different translation on line "
                            f"{first_line[source]}; keep one")
        table[source] = translation
        first_line.setdefault(source, number)
    return table


class TableTranslator(Translator):
    """Translations recorded from any system, looked up in a TSV of `source<TAB>translation`.

    table: the TSV; None or a file that does not exist yet means nothing is translated, so a
    first run lists every text it needs (see MissingTranslations).
    """

    name = "table"

    def __init__(self, table: str | None = None):
        self.table_path = Path(table) if table else None
        if self.table_path is not None and self.table_path.exists():
            self.table = read_table(self.table_path)
            log.info("translation table %s: %d rows", self.table_path, len(self.table))
        else:
            self.table = {}
            if self.table_path is not None:
                log.warning("translation table %s does not exist yet", self.table_path)

    def translate(self, texts: list[str]) -> list[str]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.table))
        if missing:
            if self.table_path is None:
                where = "no table given"
            elif not self.table_path.exists():
                where = f"{self.table_path} does not exist yet"
            else:
                where = f"not in {self.table_path}"
            raise MissingTranslations(f"{len(missing)} of {len(set(texts))} texts have no translation: {where}",
                                      missing)
        return [self.table[t] for t in texts]


def make_translator(cfg, **overrides) -> Translator:
    """A translator from its config group's plain values, with `overrides` (a checkpoint, resolved model files)
    in the place of the config's keys: the table, or the translator of the family the group's name chooses (the
    twin that serves a model of another family with the group's keys, as translator=fairseq serves a transformers
    folder). Purity depends on no family: each is imported only when chosen."""
    from repair.face import FAMILIES, family_for
    from repair.registry import build

    cfg = dict(cfg)
    if cfg.get("name") not in FAMILIES and not cfg.get("family"):  # the table, or an unknown name (one message)
        return build("translator", {"table": TableTranslator, **{n: c for n, c in FAMILIES.items() if "-" not in n}},
                     cfg, **overrides)
    files = overrides.get("files")
    model = overrides.get("checkpoint") or (files.checkpoint if files is not None else None) or cfg.get("checkpoint")
    return family_for(cfg, model).translator(cfg, **overrides)
