"""The verify stage: fixes, BLEU, Purity again, held-out Purity with both models, changed translations."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repair.fileio import read_json, read_jsonl, read_text_lines, write_json_atomic, write_text_atomic
from repair.heldout import Heldout
from repair.issues import read_issues
from repair.stages import Data, Purity

if TYPE_CHECKING:
    from repair.nmt.preprocessing import ModelFiles

log = logging.getLogger("repair.loop")


BLEU_FILES = ("bleu/base.txt", "bleu/finetuned.txt")  # the test set's translations by each model, in verify/


@dataclass
class VerifySettings:
    """The `verify` config group's keys."""

    bootstrap_samples: int
    alpha: float
    worst: int  # degraded translations listed


def translate_cached(translator, texts: list[str], path: Path) -> list[str]:
    """The translations of `texts`, from `path` when it holds one per text, else translated and written there."""
    if path.exists():
        cached = read_text_lines(path)
        if len(cached) == len(texts):
            return cached
    out = translator.translate(texts)
    write_text_atomic(path, "".join(t.replace("\n", " ") + "\n" for t in out))
    return out


def compare_models(heldout_dirs: tuple[Path, Path] | None, bleu_files: tuple[Path, Path], test_zh: list[str],
                   test_en: list[str], references: dict | None, worst: int) -> dict:
    """Held-out Purity before/after and the classes of changed translations, from the files two
    models' runs wrote: Purity folders on the held-out sentences and BLEU test set translations."""
    from repair.purity.run import TRANSLATIONS
    from repair.purity.translators import read_table
    from repair.stats import classify_changes, heldout_comparison

    rows = []
    out = {}
    if heldout_dirs is not None:
        before, after = heldout_dirs
        pair_ids = [p["id"] for p in read_jsonl(before / "pairs.jsonl")]
        out["heldout"] = {
            "sentences": read_json(before / "summary.json")["sentences"],
            **heldout_comparison(pair_ids, read_issues(before / "issues.jsonl"), read_issues(after / "issues.jsonl"),
                                 references),
        }
        table_before, table_after = read_table(before / TRANSLATIONS), read_table(after / TRANSLATIONS)
        refs = references or {}
        rows += [{"set": "heldout", "source": src, "reference": refs.get(src), "before": tr,
                  "after": table_after.get(src, "")} for src, tr in table_before.items()]
    hyp_before, hyp_after = read_text_lines(bleu_files[0]), read_text_lines(bleu_files[1])
    rows += [{"set": "test", "source": en, "reference": ref, "before": b, "after": a}
             for en, ref, b, a in zip(test_en, test_zh, hyp_before, hyp_after, strict=True)]
    out["changes"] = classify_changes(rows, worst=worst)
    return out


def run(out: Path, base: "ModelFiles", finetune_dir: Path, corrections: list[dict], test: dict, data: Data,
        purity: Purity, settings: VerifySettings, indices: list[int] | None = None, heldout: Heldout | None = None,
        previous: dict | None = None) -> dict:
    """Fixes, BLEU, Purity again on the tested sentences, Purity on the held-out ones, changed translations:
    the model fine-tuned in `finetune_dir` (its result.json and sources.jsonl) against `base`.

    previous: the previous cycle's verify result, whose fine-tuned model is this cycle's base (its
    Purity run on the held-out sentences is not run again).
    """
    from repair.data.prepare import read_clean_pairs
    from repair.stages.finetune import read_sources
    from repair.stats import bleu_significance, purity_regressions, verify_fixes

    verify_path = out / "verify.json"
    if verify_path.exists():
        return read_json(verify_path)
    finetuned = base.with_checkpoint(read_json(finetune_dir / "result.json")["best_checkpoint"])
    heldout_base_dir = Path(previous["heldout_dirs"][1]) if previous and previous.get("heldout_dirs") else None
    threshold = min(purity.settings["thresholds"])
    new_model = purity.translator(finetuned)
    fixes = verify_fixes(
        corrections, new_model.translate([c["source"] for c in corrections]) if corrections else [],
        purity.settings["unit"], threshold=threshold,
    )
    write_json_atomic(out / "fixes.json", fixes)
    log.info("fixed %s of %s corrections (%s within d = %s)", fixes["fixed"], fixes["corrections"],
             fixes["fixed_within_d"], threshold)

    test_en, test_zh = map(list, zip(*read_clean_pairs(data.dir, "test")))
    bleu_files = (out / BLEU_FILES[0], out / BLEU_FILES[1])
    hyp_base = translate_cached(purity.translator(base), test_en, bleu_files[0])
    hyp_new = translate_cached(new_model, test_en, bleu_files[1])
    bleu = bleu_significance(test_zh, hyp_base, hyp_new, n_samples=settings.bootstrap_samples, alpha=settings.alpha)
    log.info("BLEU %.2f -> %.2f (p = %.3f)", bleu["before"], bleu["after"], bleu["p_value"])

    sentences = read_text_lines(data.sentences)
    if indices is None:
        indices = list(range(len(sentences)))
    purity_dir = purity.run(out / "purity", finetuned, [sentences[i] for i in indices], [i + 1 for i in indices],
                            str(data.sentences))
    after_issues = read_issues(purity_dir / "issues.jsonl")

    heldout_dirs = None
    if heldout is not None:
        def on_heldout(folder: str, model: "ModelFiles") -> Path:
            return purity.run(out / folder, model, heldout.sentences, heldout.lines, str(data.sentences))

        heldout_dirs = (heldout_base_dir or on_heldout("heldout_base", base), on_heldout("heldout_finetuned", finetuned))
    compared = compare_models(heldout_dirs, bleu_files, test_zh, test_en, heldout.references if heldout else None,
                              settings.worst)
    if "heldout" in compared:
        from repair.purity.run import TRANSLATIONS
        from repair.purity.translators import read_table

        h = compared["heldout"]
        # held-out sentences are never fine-tuned on; their phrases may be, through corrections or replay
        tuned = read_sources(finetune_dir)
        texts = read_table(heldout_dirs[0] / TRANSLATIONS)
        h["texts"], h["texts_in_finetuning"] = len(texts), sum(t in tuned for t in texts)
        h["sentences_in_finetuning"] = sum(" ".join(t.split()) in tuned for t in heldout.sentences)
        log.info("held-out: %s -> %s issues (McNemar p = %.3g)", h["issues_before"], h["issues_after"], h["p_value"])
    c = compared["changes"]
    log.info("changed translations: %s improved, %s unchanged, %s degraded (chrF)",
             c["improved"], c["unchanged"], c["degraded"])
    result = {
        "fixes": {k: v for k, v in fixes.items() if k != "rows"},
        "bleu": bleu,
        "purity_after": read_json(purity_dir / "summary.json"),
        "regressions": purity_regressions(test["issues"], after_issues),
        **compared,
        "heldout_dirs": [str(d) for d in heldout_dirs] if heldout_dirs else None,
    }
    write_json_atomic(verify_path, result)
    return result


def compare_run(run_dir: Path, verified: list[dict], data: Data, heldout: Heldout | None, worst: int) -> dict | None:
    """The first cycle's base model against the last cycle's fine-tuned one (None with fewer than two
    verified cycles), from the files their verify stages wrote."""
    from repair.data.prepare import read_clean_pairs

    if len(verified) < 2:
        return None
    first, last = verified[0]["verify"], verified[-1]["verify"]
    test_en, test_zh = map(list, zip(*read_clean_pairs(data.dir, "test")))
    dirs = (Path(first["heldout_dirs"][0]), Path(last["heldout_dirs"][1])) if first.get("heldout_dirs") else None
    bleu_files = (run_dir / f"cycle{verified[0]['cycle']}" / "verify" / BLEU_FILES[0],
                  run_dir / f"cycle{verified[-1]['cycle']}" / "verify" / BLEU_FILES[1])
    return compare_models(dirs, bleu_files, test_zh, test_en, heldout.references if heldout else None, worst)
