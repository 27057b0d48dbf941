"""The transformers family (repair.face.ModelFamily): a Hugging Face transformers folder (MarianMT, NLLB, M2M100,
mBART-50, or an adapter a fine-tune wrote), translated in-process (repair.nmt.hf.translator) or, converted, with
CTranslate2 (repair.nmt.hf.ct2), fine-tuned with PEFT's LoRA or every weight (repair.nmt.hf.finetune)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from repair.face import ModelFamily, Translator
from repair.nmt.hf.folder import transformers_folder

if TYPE_CHECKING:
    from repair.nmt.preprocessing import ModelFiles


class TransformersFamily(ModelFamily):
    name = "transformers"
    translator_class = "repair.nmt.hf.translator:TransformersTranslator"
    model_help = ("a transformers folder as save_pretrained writes it; names on the Hugging Face hub are not fetched: "
                  "download the model on a connected machine and give its folder")
    runtime = "auto"  # where the group sets no translator.runtime: CTranslate2 where its fidelity check allows

    def translator(self, cfg: Mapping[str, Any], **overrides: Any) -> Translator:
        """The translator of the group's `runtime` (else this family's): `transformers` in-process; `ctranslate2` the
        model converted; `auto` converted where the fidelity check allows, else in-process (repair.nmt.hf.ct2)."""
        from repair.errors import UserError
        from repair.nmt.hf.ct2 import CT2_ONLY, RUNTIMES
        from repair.registry import build

        overrides = dict(overrides)
        runtime = overrides.pop("runtime", None) or cfg.get("runtime") or self.runtime
        if runtime not in RUNTIMES:
            raise UserError(f"translator.runtime={runtime}: one of {', '.join(RUNTIMES)}")
        options = {k: v for k, v in cfg.items() if k not in ("family", "runtime")}
        if runtime == "transformers":  # the converted model's keys have no meaning in-process
            options = {k: v for k, v in options.items() if k not in CT2_ONLY}
            overrides = {k: v for k, v in overrides.items() if k not in CT2_ONLY}
            return build("translator", {options.get("name"): "repair.nmt.hf.translator:TransformersTranslator"},
                         options, **overrides)
        return build("translator", {options.get("name"): "repair.nmt.hf.ct2:TransformersCT2Translator"}, options,
                     runtime=runtime, **overrides)

    def owns(self, path: str | Path) -> bool:
        return transformers_folder(path)

    def digest(self, path: str | Path) -> str:
        from repair.nmt.hf.folder import folder_sha256

        return folder_sha256(path)

    def finetune(self, base: "ModelFiles", pairs: Sequence[tuple[str, str]], valid: Sequence[tuple[str, str]],
                 out: Path, settings: Any, translator: Translator | None, **common: Any) -> dict:
        """A LoRA adapter (finetune.adapter=lora, PEFT) at its own learning rate (finetune.lora_lr, where set) or
        every weight (none); the sources get the translator's source_prefix, as it translates them."""
        from repair.nmt.hf.finetune import finetune_model

        common.pop("lr_from_model", None)  # a transformers folder records no training learning rate
        if settings.adapter == "lora" and getattr(settings, "lora_lr", None):
            common = {**common, "lr": settings.lora_lr}
        return finetune_model(base, pairs, valid, out, adapter=settings.adapter, lora_rank=settings.lora_rank,
                              lora_alpha=settings.lora_alpha, lora_targets=settings.lora_targets,
                              source_prefix=source_prefix(translator), **common)

    def probe_loss_after(self, result: Mapping[str, Any], base: "ModelFiles", out: Path) -> float | None:
        """The kept adapter or model's (checkpoint_selected/ with finetune.select=corrections)."""
        from repair.nmt.hf.finetune import probe_loss

        return probe_loss(result["best_checkpoint"], out, result.get("source_prefix"), "cpu")

    def unwritable(self, base: "ModelFiles", targets: Sequence[str]) -> list[str]:
        """Targets the folder's tokenizer cannot write back as they are (repair.nmt.hf.finetune.unspellable)."""
        from repair.nmt.hf.finetune import resolve, unspellable
        from repair.nmt.hf.folder import load_tokenizer

        tok, _ = load_tokenizer(resolve(base.checkpoint, "model.checkpoint"))
        return unspellable(tok, [("", t) for t in targets])

    def constrained_search(self, translator: Translator | None, base: "ModelFiles") -> Callable[[list, list], list]:
        """The project's own constrained search on the model's decoder step (repair.nmt.hf.search)."""
        return lambda sources, constraints: translator.searcher(5)[0].translate_constrained(sources, constraints)


def source_prefix(translator: Translator | None) -> str | None:
    """The prefix this family's translator puts before each source (None for a translator of no model of it)."""
    from repair.nmt.hf.ct2 import TransformersCT2Translator
    from repair.nmt.hf.translator import TransformersTranslator

    if isinstance(translator, (TransformersTranslator, TransformersCT2Translator)):
        return translator.source_prefix.strip() or None
    return None


class TransformersCTranslate2Family(TransformersFamily):
    """A transformers folder converted for CTranslate2 (translator=ctranslate2 given such a folder); fine-tuned
    as the transformers family's."""

    name = "ctranslate2-transformers"
    translator_class = "repair.nmt.hf.ct2:TransformersCT2Translator"
    runtime = "ctranslate2"  # asked for by name: CTranslate2 whatever the fidelity check finds (with a warning)
