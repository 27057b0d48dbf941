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

        if settings.adapter == "lora" and getattr(settings, "lora_lr", None):
            common = {**common, "lr": settings.lora_lr}
        return finetune_model(base, pairs, valid, out, adapter=settings.adapter, lora_rank=settings.lora_rank,
                              lora_alpha=settings.lora_alpha, lora_targets=settings.lora_targets,
                              source_prefix=source_prefix(translator), **common)

    def probe_loss_after(self, result: Mapping[str, Any], base: "ModelFiles", out: Path) -> float | None:
        """The kept adapter or model's (checkpoint_selected/ with finetune.select=corrections)."""
        from repair.nmt.hf.finetune import probe_loss

        return probe_loss(result["best_checkpoint"], out, result.get("source_prefix"), "cpu")

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
