"""A fine-tune reaches its fixes on models none of us made: the fine-tune stage (repair.stages.finetune.run, as the
loop runs it, with the finetune group's defaults but for a smaller replay and patience, to be quick) on corrections
made as the oracle makes them (a sentence's reference, where the base model translates it otherwise). Used by
tests/test_joint_model.py (a fairseq model trained the joint-SentencePiece way) and tests/test_hf.py (a tiny Marian
folder, a LoRA adapter and every weight).

On these models the validation loss rises from the first epoch while the corrections are still being learnt: a
patience on the loss alone ended such fine-tunes short of the fix rate."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]


def data_folder(corpus: Path, out: Path, n_train: int, n_valid: int) -> Path:
    """A data folder as the loop's prepare stage leaves one: clean/{train,valid}.{en,zh} from the corpus."""
    clean = out / "clean"
    clean.mkdir(parents=True)
    for split, n in (("train", n_train), ("valid", n_valid)):
        for lang in ("en", "zh"):
            lines = (corpus / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            (clean / f"{split}.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return out


def reach(translator_cfg: dict, checkpoint: Path, data_dir: Path, candidates: list[tuple[str, str]], n: int,
          out: Path, **changed) -> tuple[dict, dict]:
    """The fine-tune stage on the first n candidates (source, reference) that the base model translates otherwise,
    each corrected by its reference: (the stage's result, the kept model's fixes as the verify stage counts them,
    through the loop's translators, the scoped edit included)."""
    from repair.stages import Translators
    from repair.stages.finetune import run, settings_from_config
    from repair.stats import same_translation, verify_fixes

    translators = Translators(translator_cfg, "cpu", 2)
    base = translators.load(checkpoint, None)
    translator = translators(base)
    said = translator.translate([s for s, _ in candidates])
    corrections = [{"source": s, "correction": z, "translation": t, "kind": "word/phrase mistranslation"}
                   for (s, z), t in zip(candidates, said) if not same_translation(t, z)][:n]
    assert len(corrections) == n
    ft = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "finetune" / "default.yaml"), resolve=True)
    settings = settings_from_config({**ft, **changed}, seed=1, device="cpu", threads=2)
    result = run(out, base, corrections, data_dir, settings, translator=translator, translator_for=translators)
    kept = translators(base.with_checkpoint(result["best_checkpoint"]))
    return result, verify_fixes(corrections, kept.translate([c["source"] for c in corrections]))
