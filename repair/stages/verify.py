"""The verify stage: fixes, BLEU, Purity again, held-out Purity with both models, changed translations."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

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
        table_before, table_after = (read_table(d / TRANSLATIONS, empty_ok=True) for d in (before, after))  # the models' own output
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
    from repair.stages.sources import read_sources
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
    tuned = read_sources(finetune_dir)
    bleu = bleu_untuned(test_en, test_zh, hyp_base, hyp_new, tuned, settings)
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
        texts = read_table(heldout_dirs[0] / TRANSLATIONS, empty_ok=True)
        h["texts"], h["texts_in_finetuning"] = len(texts), sum(t in tuned for t in texts)
        h["sentences_in_finetuning"] = sum(" ".join(t.split()) in tuned for t in heldout.sentences)
        log.info("held-out: %s -> %s issues (McNemar p = %.3g)", h["issues_before"], h["issues_after"], h["p_value"])
    c = compared["changes"]
    log.info("changed translations: %s improved, %s unchanged, %s degraded (chrF)",
             c["improved"], c["unchanged"], c["degraded"])
    measures = repair_measures(fixes, corrections, heldout_dirs, heldout, compared.get("heldout"),
                               (test_en, test_zh, hyp_base, hyp_new), tuned, purity.settings["stop_tokens"], settings,
                               taught_words(new_model))
    log_measures(measures)
    result = {
        "fixes": {k: v for k, v in fixes.items() if k != "rows"},
        "repair": measures,
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


def bleu_untuned(test_en: list[str], test_zh: list[str], hyp_base: list[str], hyp_new: list[str], tuned: set[str],
                 settings: VerifySettings) -> dict:
    """BLEU before/after with its paired bootstrap on the test lines no fine-tuning pair came from: where
    Purity's input and the BLEU split overlap, every line a fine-tuning source came from (tested,
    corrected, kept) leaves the set; `excluded` says how many."""
    from repair.measures import bleu_lines
    from repair.stats import bleu_significance

    kept, excluded = bleu_lines(test_en, tuned)
    if excluded:
        log.info("BLEU on %s of %s test lines: %s are sources of fine-tuning pairs and leave the BLEU set",
                 len(kept), len(test_en), excluded)
    bleu = bleu_significance([test_zh[i] for i in kept], [hyp_base[i] for i in kept], [hyp_new[i] for i in kept],
                             n_samples=settings.bootstrap_samples, alpha=settings.alpha)
    return {**bleu, "excluded": excluded, "lines": len(test_en)}


def text_kinds(pairs: list[dict], sentences: list[str]) -> dict[str, str]:
    """Each text of a Purity run: "sentence" (an input sentence), "mutant" (a replacement's side) or "phrase"."""
    kinds = {}
    for p in pairs:
        for s in p["sides"]:
            if s["role"] == "mutant":
                kinds[s["source"]] = "mutant"
    for s in sentences:
        kinds[" ".join(s.split())] = "sentence"
    return kinds


def repair_measures(fixes: dict, corrections: list[dict], heldout_dirs: tuple[Path, Path] | None,
                    heldout: Heldout | None, pair_figures: dict | None, bleu_set: tuple[list, list, list, list],
                    tuned: set[str], stop_tokens, settings: VerifySettings, taught: Sequence[str] = ()) -> dict:
    """Efficacy, generality and locality of one repair (a cycle, or the run: every cycle's corrections, the
    first base model against the last fine-tuned one).

    bleu_set: the BLEU test set's English, references, base and fine-tuned translations; its lines that a
    fine-tuning source came from (`tuned`) are left out, as they are of BLEU. taught: the words a scoped edit
    taught, for locality's counts apart.
    """
    from repair.measures import (bleu_lines, correction_terms, exact_generality, locality, reach,
                                 reach_by_sentence, sentence_generality, term_recall)
    from repair.purity.run import TRANSLATIONS
    from repair.purity.translators import read_table

    test_en, test_zh, hyp_base, hyp_new = bleu_set
    kept, _ = bleu_lines(test_en, tuned)
    rows = [{"kind": "sentence", "set": "test", "source": test_en[i], "reference": test_zh[i],
             "before": hyp_base[i], "after": hyp_new[i]} for i in kept]
    sentence_rows = list(rows)
    held_sentences = None
    generality: dict = {}
    if heldout_dirs is not None and heldout is not None:
        before, after = heldout_dirs
        pairs = read_jsonl(before / "pairs.jsonl")
        ids_before = {i["id"] for i in read_issues(before / "issues.jsonl")}
        ids_after = {i["id"] for i in read_issues(after / "issues.jsonl")}
        generality["sentences"] = sentence_generality(heldout.sentences, pairs, ids_before, ids_after)
        if pair_figures:
            generality["pairs"] = {k: pair_figures[k] for k in ("pairs", "issues_before", "issues_after", "resolved",
                                                                 "new", "p_value") if k in pair_figures}
        table_before, table_after = (read_table(d / TRANSLATIONS, empty_ok=True) for d in (before, after))  # the models' own output
        refs = heldout.references
        generality["exact"] = exact_generality(list(table_before), refs, table_before, table_after)
        generality["reach"] = reach(corrections, pairs, ids_before, table_before, refs, stop_tokens)
        kinds = text_kinds(pairs, heldout.sentences)
        held_rows = [{"kind": kinds.get(t, "phrase"), "set": "heldout", "source": t,
                      "reference": refs.get(t) if refs is not None else None, "before": tr,
                      "after": table_after.get(t, "")} for t, tr in table_before.items()]
        rows += held_rows
        held_sentences = [r for r in held_rows if r["kind"] == "sentence"]
        sentence_rows += held_sentences
    terms = correction_terms(corrections, stop_tokens)
    generality["term_recall"] = term_recall(terms, sentence_rows)
    if held_sentences is not None:
        generality["term_recall_heldout"] = term_recall(terms, held_sentences)
        generality["reach_sentences"] = reach_by_sentence(terms, held_sentences, corrections, taught, stop_tokens)
    return {
        "efficacy": {k: fixes.get(k) for k in ("corrections", "fixed", "fix_rate", "fixed_within_d")},
        "generality": generality,
        "locality": locality(rows, [c["source"] for c in corrections], samples=settings.bootstrap_samples,
                             taught=taught),
    }


def taught_words(model) -> tuple[str, ...]:
    """The words a scoped edit's fine-tune taught (finetune.scope=terms), every cycle's; () for any other model."""
    from repair.edit.scoped import ScopedTranslator

    return model.scope.words if isinstance(model, ScopedTranslator) else ()


def log_measures(m: dict) -> None:
    g, loc = m["generality"], m["locality"]
    s = g.get("sentences")
    if s:
        log.info("held-out sentences with issues: %s -> %s of %s (McNemar p = %.3g)", s["with_issues_before"],
                 s["with_issues_after"], s["sentences"], s["p_value"])
    t = g["term_recall"]
    log.info("term recall: %s -> %s of %s sentences (%s terms, p = %.3g)", t["before"], t["after"], t["sentences"],
             t["terms"], t["p_value"])
    log.info("locality: %s of %s unrelated texts changed; correct -> wrong %s of %s, wrong -> correct %s "
             "(p = %.3g); chrF %s %s", loc["changed"], loc["texts"], loc["correct_to_wrong"], loc["correct_before"],
             loc["wrong_to_correct"], loc["p_value"], loc["chrf_delta"], loc["chrf_delta_ci"])
    if "taught_words" in loc:
        t, o = loc["taught_words"], loc["outside"]
        log.info("locality: %s of the %s texts holding a taught word changed (correct -> wrong %s), %s of the %s others "
                 "(correct -> wrong %s)", t["changed"], t["texts"], t["correct_to_wrong"], o["changed"], o["texts"],
                 o["correct_to_wrong"])


def run_measures(cycles: list[dict], run_dir: Path, data: Data, heldout: Heldout | None, last_model,
                 tuned: set[str], stop_tokens, settings: VerifySettings, pair_figures: dict | None) -> dict:
    """The run's BLEU and repair measures over several cycles: every cycle's corrections (translated by the
    last fine-tuned model), the first base model against the last fine-tuned one, the BLEU test lines no
    cycle's fine-tuning source came from. cycles: the verified cycles, each {"cycle", "corrections", "verify"}."""
    from repair.data.prepare import read_clean_pairs
    from repair.stats import verify_fixes

    corrections = [c for cycle in cycles for c in cycle["corrections"]]
    threshold = cycles[-1]["verify"]["fixes"].get("threshold", 0)
    unit = cycles[-1]["verify"]["purity_after"].get("settings", {}).get("unit", "char")
    fixes = verify_fixes(corrections, last_model.translate([c["source"] for c in corrections]), unit,
                         threshold=threshold)
    test_en, test_zh = map(list, zip(*read_clean_pairs(data.dir, "test")))
    hyp_base = read_text_lines(run_dir / f"cycle{cycles[0]['cycle']}/verify/bleu/base.txt")
    hyp_new = read_text_lines(run_dir / f"cycle{cycles[-1]['cycle']}/verify/bleu/finetuned.txt")
    first, last = cycles[0]["verify"], cycles[-1]["verify"]
    dirs = (Path(first["heldout_dirs"][0]), Path(last["heldout_dirs"][1])) if first.get("heldout_dirs") else None
    measures = repair_measures(fixes, corrections, dirs, heldout, pair_figures, (test_en, test_zh, hyp_base, hyp_new),
                               tuned, stop_tokens, settings, taught_words(last_model))
    log_measures(measures)
    return {"bleu": bleu_untuned(test_en, test_zh, hyp_base, hyp_new, tuned, settings), "repair": measures}
