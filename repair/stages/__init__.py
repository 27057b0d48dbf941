"""The loop's stages below its entry point (repair.loop): plain values in, files in the run folder out."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from repair.face import ModelFamily, Translator
    from repair.nmt.preprocessing import ModelFiles


@dataclass
class Data:
    dir: Path
    sentences: Path  # English sentences Purity tests
    references: Path | None  # oracle references for every sentence and NP (demo only)

    @cached_property
    def reference_table(self) -> dict[str, str] | None:
        """The references the oracle judges by, read once per run: data.references (the demo's references.jsonl
        of sentences and phrases, or a Chinese file aligned line by line with the sentences Purity tests), else the
        Chinese file beside the input (X.zh beside X.en: a parallel corpus's test split, WMT'18's newstest), whose
        references are for whole sentences only; None when there is neither."""
        if self.references is None:
            return self.aligned_references(None)
        if self.references.suffix == ".jsonl":
            from repair.data.demo import load_references

            return load_references(self.references)
        return self.aligned_references(self.references)

    def aligned_references(self, zh: Path | None):
        """References for the sentences from a Chinese file aligned with them (default: X.zh beside X.en); None
        where there is no such file. One that does not line up (given as data.references, or X.zh beside X.en) is
        one UserError naming both files' line counts."""
        from repair.data.demo.references import References
        from repair.errors import UserError
        from repair.fileio import read_text_lines

        given = zh is not None
        zh = zh if given else (self.sentences.with_suffix(".zh") if self.sentences.suffix == ".en" else None)
        if zh is None or not zh.is_file():
            if given:
                raise UserError(f"data.references={zh}: not found (a references.jsonl, or the Chinese of "
                                f"{self.sentences} line by line)")
            return None
        en_lines, zh_lines = read_text_lines(self.sentences), read_text_lines(zh)
        if len(en_lines) != len(zh_lines):
            where = f"data.references={zh}" if given else f"{zh}, the references beside the sentences,"
            raise UserError(f"{where} has {len(zh_lines)} lines but the sentences Purity tests, {self.sentences}, "
                            f"have {len(en_lines)}: the references do not line up with the sentences. Give the Chinese "
                            f"of each sentence on its line" + ("" if given else f", or move {zh} aside (no references)"))
        return References.aligned(en_lines, zh_lines)

    @cached_property
    def sentence_references(self) -> dict[str, str] | None:
        """References for the sentences Purity tests (see reference_table)."""
        return self.reference_table


def check_translator(cfg: dict) -> "ModelFamily":
    """The model family the translator group chooses (repair.face), once it has said the loop can test, fine-tune
    and verify with the group's keys."""
    from repair.face import family_for

    family = family_for(cfg)
    family.check_loop(cfg)
    return family


class Translators:
    """The `translator` config group's translator for each model the loop tests (the base, each
    fine-tuned one), built on first use and kept. The model under test takes the place of the group's
    checkpoint and preprocessing keys; the loop's device and thread count apply unless the group sets them."""

    def __init__(self, cfg: dict, device: str = "auto", threads: int | None = None):
        self.family = check_translator(cfg)
        self.cfg = dict(cfg)
        self.overrides: dict = {}
        if self.cfg.get("device", "auto") == "auto":
            self.overrides["device"] = device
        if self.cfg.get("threads") is None:
            self.overrides["threads"] = threads
        self.built: dict[str, "Translator"] = {}

    def family_of(self, model: "ModelFiles | str | Path") -> "ModelFamily":
        """The family that serves a model with the group's keys (the group's, or its twin for another family's model)."""
        from repair.face import family_for

        return family_for(self.cfg, model if isinstance(model, (str, Path)) else model.checkpoint)

    def preprocessing(self) -> dict:
        """The group's keys that set how the model's text is encoded, where set."""
        return {k: self.cfg[k] for k in self.family.preprocessing_keys if self.cfg.get(k) not in (None, "")}

    def _make(self, **model) -> "Translator":
        from repair.purity.translators import make_translator

        return make_translator(self.cfg, **model, **self.overrides)

    def __call__(self, model: "ModelFiles") -> "Translator":
        """The model's translator; a scoped edit (scope.json beside its checkpoint, repair.edit.scoped) is
        served with its base model outside the scope."""
        from repair.edit.scoped import ScopedTranslator, scope_of

        if model.checkpoint not in self.built:
            scope = scope_of(model.checkpoint)
            edited = self.plain(model)
            # a translator that serves the edit's base model with its own weights, the edit off: one model in memory
            fallback = None if scope is None else edited.without_edit(scope.fallback)
            self.built[model.checkpoint] = edited if scope is None else ScopedTranslator(
                edited, fallback or self(model.with_checkpoint(scope.fallback)), scope,
                self.plain(model.with_checkpoint(scope.words_checkpoint)) if scope.words_checkpoint else None)
        return self.built[model.checkpoint]

    def plain(self, model: "ModelFiles") -> "Translator":
        """The model's own translator, whatever its scope (a scoped edit's fine-tuned weights alone)."""
        key = f"{model.checkpoint}#plain"
        if key not in self.built:
            # the model's own files in the place of the group's preprocessing keys
            self.built[key] = self.adapter_of_built(model) or self._make(
                files=model, checkpoint=None, data_dir=None, **{k: None for k in self.family.preprocessing_keys})
        return self.built[key]

    def adapter_of_built(self, model: "ModelFiles") -> "Translator | None":
        """An edit (an adapter) whose base model is built already, added to that model so that its weights are in
        memory once (Translator.with_adapter); None otherwise."""
        for built in {id(t): t for t in self.built.values()}.values():
            twin = built.with_adapter(model.checkpoint)
            if twin is not None:
                return twin
        return None

    def load(self, checkpoint: Path, data_dir: Path | None) -> "ModelFiles":
        """A checkpoint (file or model folder) loaded once, into its translator: its files, resolved
        from the group's preprocessing keys and data_dir, and checked against the checkpoint."""
        translator = self._make(checkpoint=str(checkpoint), data_dir=str(data_dir) if data_dir else None)
        checkpoint = translator.files.checkpoint
        for key in (checkpoint, f"{checkpoint}#plain", str(Path(checkpoint).resolve())):  # a scope names it resolved
            self.built[key] = translator
        return translator.files


@dataclass
class Purity:
    """What a Purity run needs besides its sentences: the parser and a translator per model, each built on
    first use, and run_purity's settings (the `purity` config group's)."""

    parser: Callable[[], Any]
    translator: Callable[["ModelFiles"], "Translator"]
    settings: dict
    model_check: str = "stop"  # the check before the model is tested (repair.purity.model_check): stop, warn, off

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
