"""The fairseq family (repair.face.ModelFamily): a fairseq checkpoint (.pt, or a model folder holding model.pt),
translated in-process (repair.nmt.fairseq.translator) or, converted, with CTranslate2 (repair.nmt.fairseq.ct2), trained and
fine-tuned with fairseq (repair.nmt.fairseq.train, repair.nmt.fairseq.finetune)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from repair.errors import UserError
from repair.face import ModelFamily, Translator
from repair.nmt.preprocessing import OPTION_KEYS
from repair.nmt.fairseq.model_files import HUB_CHECKPOINT

if TYPE_CHECKING:
    from repair.nmt.preprocessing import ModelFiles


class FairseqFamily(ModelFamily):
    name = "fairseq"
    translator_class = "repair.nmt.fairseq.translator:FairseqTranslator"
    twins = {"transformers": "transformers"}  # a transformers folder given to translator=fairseq
    preprocessing_keys = OPTION_KEYS
    needs_encoded_corpus = True
    model_help = ("a fairseq checkpoint or model folder, or a transformers folder as save_pretrained writes it; names "
                  "on the Hugging Face hub are not fetched: download the model on a connected machine and give its "
                  "folder")

    def owns(self, path: str | Path) -> bool:
        p = Path(path)
        return (p.is_file() and p.suffix == ".pt") or (p.is_dir() and (p / HUB_CHECKPOINT).is_file())

    def train(self, data_dir: Path, checkpoint_dir: Path, model_cfg: Mapping[str, Any], seed: int,
              device: str) -> Path:
        from repair.nmt.fairseq.train import train_model

        return train_model(data_dir, Path(checkpoint_dir), model_cfg, seed=seed, device=device)

    def finetune(self, base: "ModelFiles", pairs: Sequence[tuple[str, str]], valid: Sequence[tuple[str, str]],
                 out: Path, settings: Any, translator: Translator | None, **common: Any) -> dict:
        from repair.nmt.fairseq.finetune import finetune_model

        return finetune_model(base, pairs, valid, out, **common)

    def probe_loss_after(self, result: Mapping[str, Any], base: "ModelFiles", out: Path) -> float | None:
        from repair.nmt.fairseq.checkpoint import load_checkpoint
        from repair.nmt.fairseq.finetune import probe_loss

        return probe_loss(load_checkpoint(result["best_checkpoint"]), base, out, load_checkpoint(base.checkpoint))

    def unwritable(self, base: "ModelFiles", targets: Sequence[str]) -> list[str]:
        """Targets whose encoding, spelt with the target dictionary's pieces (the fine-tune's), keeps a piece the
        dictionary lacks."""
        from repair.data.prepare import clean_text
        from repair.nmt.preprocessing import Codec, dictionary_symbols

        symbols = dictionary_symbols(base.tgt.dict)
        codec = Codec(base.tgt, fit=symbols)
        lines = codec.encode_all([clean_text(t) for t in targets])
        return [t for t, line in zip(targets, lines) if any(p not in symbols for p in line.split())]

    def constrained_search(self, translator: Translator | None, base: "ModelFiles") -> Callable[[list, list], list]:
        """fairseq's constrained search with the loaded translator, or the base checkpoint loaded for it (a
        translator of another runtime, such as CTranslate2, searches nothing)."""
        from repair.nmt.fairseq.constrained import translate_constrained
        from repair.nmt.fairseq.translator import FairseqTranslator

        def search(sources: list, constraints: list) -> list:
            model = translator if isinstance(translator, FairseqTranslator) else FairseqTranslator(files=base)
            return translate_constrained(model, sources, constraints)

        return search


class CTranslate2Family(FairseqFamily):
    """fairseq's models translated with CTranslate2 (converted once, cached beside the checkpoint); trained and
    fine-tuned as fairseq's."""

    name = "ctranslate2"
    translator_class = "repair.nmt.fairseq.ct2:CTranslate2Translator"
    twins = {"transformers": "ctranslate2-transformers"}

    def check_loop(self, cfg: Mapping[str, Any]) -> None:
        if cfg.get("model_dir"):
            raise UserError(f"translator.model_dir={cfg['model_dir']}: a converted CTranslate2 model can be tested "
                            f"(python -m repair.purity translator=ctranslate2 translator.model_dir=...) but not "
                            f"fine-tuned: the loop needs the fairseq checkpoint (model.checkpoint=PT)")
