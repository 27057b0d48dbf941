"""The interface every translator implements (Purity's view of a translator), and the table of recorded
translations (`translator=table`). The translator classes are chosen by name here (`make_translator`)."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from pathlib import Path

from repair.errors import UserError

log = logging.getLogger(__name__)


class Translator(ABC):
    """Translates a batch of English texts into Chinese, one output per input, in order."""

    name: str = "translator"

    @abstractmethod
    def translate(self, texts: list[str]) -> list[str]:
        ...

    def begin(self, texts: list[str]):
        """Start translating `texts` in the background (Purity's sentences, while their pairs are built); a
        function that waits for them and returns their translations in order, or None where this translator
        does not translate in the background (then they are translated with the rest, as before)."""
        return None

    def describe(self) -> dict:
        """What a run's summary says of the translator (a translator may add its settings and checks)."""
        return {"name": self.name}

    def why_no_search(self) -> str | None:
        """Why this translator cannot run the lexically constrained search that suggestions need (None: it can).
        Cheap: nothing is loaded."""
        return f"translator={self.name} has no fairseq checkpoint to search"

    def searcher(self, beam: int) -> tuple[object | None, str]:
        """(what searches, a note for a suggestion's origin), or (None, why not). What searches offers
        `translate_constrained(sources, constraints, **options)`, `score(sources, targets)`, `tgt_codec` and
        `phrase_tokens(phrase, start)` (see repair.nmt.constrained)."""
        return None, self.why_no_search() or ""


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


# The `translator` config group: its name picks a translator class, its other keys go to the class (the one rule
# of repair.registry). The model backends are named by where they live and imported only when chosen, so Purity
# does not depend on them: Purity's CLI, the loop's stages and the benchmarks all build here.
TRANSLATORS = {
    "table": TableTranslator,
    "fairseq": "repair.nmt.translator:FairseqTranslator",
    "ctranslate2": "repair.nmt.ct2:CTranslate2Translator",
    "transformers": "repair.nmt.hf.translator:TransformersTranslator",
}
# A Hugging Face transformers folder given to a translator made for fairseq checkpoints is served by its
# transformers twin, with the keys they share (beam, max_len, max_tokens, device, threads ...).
TRANSFORMERS_TWINS = {"fairseq": "transformers", "ctranslate2": "repair.nmt.hf.ct2:TransformersCT2Translator"}


def make_translator(cfg, **overrides) -> Translator:
    """A translator from its config group's plain values, with `overrides` (a checkpoint, resolved model files)
    in the place of the config's keys."""
    from repair.registry import build

    cfg = dict(cfg)
    files = overrides.get("files")
    model = overrides.get("checkpoint") or (files.checkpoint if files is not None else None) or cfg.get("checkpoint")
    if cfg.get("name") in TRANSFORMERS_TWINS and model and transformers_folder(model):
        twin = TRANSFORMERS_TWINS[cfg["name"]]
        return build("translator", {cfg["name"]: TRANSLATORS.get(twin, twin)}, cfg, **overrides)
    return build("translator", TRANSLATORS, cfg, **overrides)


def transformers_folder(path) -> bool:
    """Whether a model path is a Hugging Face transformers folder (config.json; an adapter's adapter_config.json;
    a fine-tune's checkpoint_best/ holding either) rather than a fairseq checkpoint or model folder."""
    p = Path(path)
    return p.is_dir() and any((q / name).is_file() for q in (p, p / "checkpoint_best", p / "checkpoint_selected")
                              for name in ("config.json", "adapter_config.json"))

