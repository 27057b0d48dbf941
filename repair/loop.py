"""`python -m repair.loop`: prepare -> train/load -> test -> review -> fine-tune -> verify -> report.

One run is one folder. Every stage writes its outputs there and is skipped when they exist, so
rerunning the same command resumes at the first unfinished stage. This module only orders the
stages and maps the configuration onto the functions that do the work.
"""

from __future__ import annotations

import hashlib
import logging
import random
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from omegaconf import DictConfig, OmegaConf

from repair.errors import UserError, exit_on_user_error
from repair.issues import read_issues
from repair.fileio import (check_folder_overrides, read_json, read_jsonl, read_text_lines, write_json_atomic,
                           write_text_atomic)

if TYPE_CHECKING:
    from repair.nmt.preprocessing import ModelFiles

log = logging.getLogger("repair.loop")


# ---------------------------------------------------------------- run folder


def flat(cfg: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat(v, key + "."))
        else:
            out[key] = v
    return out


def check_run_config(run_dir: Path, cfg: DictConfig) -> None:
    """Refuse to mix a run folder with another configuration; name the first key that differs."""
    current = OmegaConf.to_container(cfg, resolve=True)
    path = run_dir / "config.json"
    if not path.exists():
        write_json_atomic(path, current)
        return
    saved = read_json(path)
    ignored = tuple(cfg.resume_ignores)
    a, b = flat(saved), flat(current)
    for key in sorted(set(a) | set(b)):
        if any(key == k or key.startswith(k + ".") for k in ignored):
            continue
        if a.get(key) != b.get(key):
            raise UserError(
                f"{run_dir} holds a run with {key}={a.get(key)!r}, this command has {key}={b.get(key)!r}. "
                f"Use another run_dir=... for the new configuration, or rerun with {key}={a.get(key)!r} to resume."
            )


@dataclass
class Run:
    cfg: DictConfig
    dir: Path
    seconds: dict = field(default_factory=dict)
    _translators: dict = field(default_factory=dict)
    _parser: object = None

    @contextmanager
    def stage(self, name: str):
        log.info("== %s", name)
        start = time.perf_counter()
        yield
        self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 2)
        write_json_atomic(self.dir / "seconds.json", self.seconds)

    def translator(self, model: "ModelFiles"):
        """The `translator` config group's translator for one model (the base or a fine-tuned one)."""
        from repair.purity.translators import make_translator

        key = model.checkpoint
        if key not in self._translators:
            self._translators[key] = make_translator(self.cfg.translator, **model_overrides(self.cfg, model))
        return self._translators[key]

    def parser(self):
        if self._parser is None:
            from repair.purity.parsers import make_parser

            self._parser = make_parser(self.cfg.parser)
        return self._parser


def model_overrides(cfg: DictConfig, model: "ModelFiles") -> dict:
    """What the loop puts in place of the translator config's keys: the model under test with its
    resolved files, the loop's device and the model's thread count unless the translator sets them."""
    from repair.nmt.preprocessing import OPTION_KEYS

    t = cfg.translator
    check_translator(cfg)
    # ctranslate2: the fairseq model (base or fine-tuned) converted and cached beside its checkpoint
    out: dict = {"files": model, "checkpoint": None, "data_dir": None, **{k: None for k in OPTION_KEYS}}
    if t.get("device", "auto") == "auto":
        out["device"] = cfg.device
    if t.get("threads") is None:
        out["threads"] = cfg.model.get("threads")
    return out


def check_translator(cfg: DictConfig) -> None:
    """The loop fine-tunes a fairseq model: it is tested with fairseq or, converted, with CTranslate2."""
    t = cfg.translator
    if t.name not in ("fairseq", "ctranslate2"):
        raise UserError(f"translator={t.name}: the loop tests, fine-tunes and verifies a fairseq model; "
                        f"use translator=fairseq or translator=ctranslate2")
    if t.get("model_dir"):
        raise UserError(f"translator.model_dir={t.model_dir}: a converted CTranslate2 model can be tested "
                        f"(python -m repair.purity translator=ctranslate2 translator.model_dir=...) but not "
                        f"fine-tuned: the loop needs the fairseq checkpoint (model.checkpoint=PT)")


def sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


# ---------------------------------------------------------------- stages


@dataclass
class Data:
    dir: Path
    sentences: Path  # English sentences Purity tests
    references: Path | None  # oracle references for every sentence and NP (demo only)


def model_checkpoint(cfg: DictConfig) -> str | None:
    """The model brought along: model.checkpoint, or translator.checkpoint (a file or a model folder)."""
    return cfg.model.get("checkpoint") or cfg.translator.get("checkpoint")


def stage_prepare(cfg: DictConfig) -> Data:
    from repair.data.prepare import prepare_data

    data_dir = Path(cfg.data.dir)
    sources = None
    if cfg.data.name == "demo":
        from repair.data.demo import build_demo

        build_demo(data_dir, **OmegaConf.to_container(cfg.data.build, resolve=True))
    elif cfg.data.name == "wmt18":
        from repair.data.wmt18 import collect

        collect(data_dir, test_set=cfg.data.test_set)
    elif cfg.data.name == "parallel":
        from repair.data.prepare import parallel_sources

        sources = parallel_sources(data_dir, {s: cfg.data.get(s) for s in ("train", "valid", "test")})
    else:
        raise UserError(f"data={cfg.data.name}: unknown data set (demo | wmt18 | parallel)")
    # A model brought along has its own preprocessing: the corpus is only cleaned.
    prepare_data(data_dir, sources=sources, encode=not model_checkpoint(cfg),
                 **OmegaConf.to_container(cfg.data.prepare, resolve=True))
    if cfg.purity.input:
        sentences = Path(cfg.purity.input)
    elif cfg.data.get("sentences"):
        sentences = data_dir / cfg.data.sentences
    else:
        sentences = sources[("test", "en")] if sources else data_dir / "raw" / "test.en"
    references = data_dir / cfg.data.references if cfg.data.get("references") else None
    return Data(data_dir, sentences, references)


def stage_train(run: Run, data: Data) -> "ModelFiles":
    """The model under test with its files: trained here, or the one model.checkpoint names."""
    from repair.nmt.preprocessing import OPTION_KEYS, ModelFiles
    from repair.nmt.translator import load_model_files

    cfg = run.cfg
    marker = run.dir / "model.json"
    if marker.exists():
        saved = read_json(marker)
        if not isinstance(saved, dict) or not (isinstance(saved.get("files"), dict)
                                               or isinstance(saved.get("checkpoint"), str)):
            raise UserError(f"{marker}: names no model (\"checkpoint\": PATH, or \"files\"); delete it to train or "
                            "load the model again")
        if saved.get("files"):
            return ModelFiles.from_dict(saved["files"])
        checkpoint = Path(saved["checkpoint"])
    elif model_checkpoint(cfg):
        checkpoint = Path(model_checkpoint(cfg))
        if not checkpoint.exists():
            raise UserError(f"model.checkpoint={checkpoint}: no such file or folder")
    else:
        from repair.nmt.train import train_model

        checkpoint = train_model(data.dir, Path(cfg.checkpoint_dir), cfg.model, seed=cfg.seed, device=cfg.device)
    options = {k: v for k, v in OmegaConf.to_container(cfg.translator, resolve=True).items()
               if k in OPTION_KEYS}
    model = load_model_files(checkpoint, data.dir, **options)
    log.info("model %s; %s; %s", model.checkpoint, model.src.describe(), model.tgt.describe())
    write_json_atomic(marker, {"checkpoint": model.checkpoint, "sha256": sha256(Path(model.checkpoint)),
                               "files": model.to_dict()})
    return model


def purity_kwargs(cfg: DictConfig, data_dir: Path | None = None) -> dict:
    """The `purity` group's settings for run_purity (the loop's own keys left out). The replacement relation
    reads the data's lexicon (the demo writes one) and its cleaned training English unless given others."""
    p = cfg.purity
    relations = list(p.get("relations") or ["rti"])
    options = {}
    if "replace" in relations:
        replace = OmegaConf.to_container(p.replace, resolve=True) if p.get("replace") else {}
        if data_dir is not None:
            if not replace.get("lexicon") and (data_dir / "lexicon.jsonl").is_file():
                replace["lexicon"] = str(data_dir / "lexicon.jsonl")
            if not replace.get("corpus") and (data_dir / "clean" / "train.en").is_file():
                replace["corpus"] = str(data_dir / "clean" / "train.en")
        options["replace"] = replace
    return dict(
        thresholds=tuple(p.thresholds),
        unit=p.unit,
        skip_latin=p.skip_latin,
        max_words=p.max_words,
        min_content_words=p.min_content_words,
        max_sentence_words=p.max_sentence_words,
        stopwords=p.stopwords,
        stop_tokens=tuple(p.stop_tokens),
        relations=relations,
        relation_options=options,
    )


def heldout_split(sentences: list[str], share: float, source: str = "input") -> tuple[list[int], list[int]]:
    """Indices of the held-out sentences and of the rest, each in input order.

    The same texts are held out whatever the order of the input or the seed: the unique non-blank
    sentences sorted by their SHA-1, the first round(share * n) of them. Every copy of a repeated
    sentence falls on the same side.
    """
    if not 0 <= share < 1:
        raise UserError(f"purity.holdout={share}: give the share of {source} to hold out, 0 <= share < 1")
    texts = {" ".join(s.split()) for s in sentences if s.strip()}
    ranked = sorted(texts, key=lambda t: hashlib.sha1(t.encode("utf-8")).hexdigest())
    held = set(ranked[: round(share * len(ranked))])
    heldout = [i for i, s in enumerate(sentences) if s.strip() and " ".join(s.split()) in held]
    rest = [i for i, s in enumerate(sentences) if s.strip() and " ".join(s.split()) not in held]
    return heldout, rest


def cycle_slice(run_dir: Path, k: int, rest: list[int], per_cycle: int | None, cycles: int) -> list[int]:
    """The input indices cycle k tests: the next ones, in input order, that no earlier cycle tested.

    Recorded in cycleK/test/slice.json when first drawn, so a resumed run (even with another
    `cycles`) keeps what each cycle tested. Empty when the input is used up.
    """
    path = run_dir / f"cycle{k}" / "test" / "slice.json"
    if path.exists():
        return [n - 1 for n in read_json(path)["lines"]]
    used = set()
    for j in range(1, k):
        used.update(cycle_slice(run_dir, j, rest, per_cycle, cycles))
    if per_cycle is not None and per_cycle < 1:
        raise UserError(f"purity.per_cycle={per_cycle}: give a number of sentences >= 1, or null")
    size = per_cycle or -(-len(rest) // max(cycles, 1))
    chosen = [i for i in rest if i not in used][:size]
    if chosen:
        write_json_atomic(path, {"sentences": len(chosen), "lines": [i + 1 for i in chosen]})
    return chosen


def line_span(indices: list[int]) -> str:
    return f"{indices[0] + 1}-{indices[-1] + 1}" if indices else "-"


def stage_test(run: Run, out: Path, checkpoint: "ModelFiles", data: Data, indices: list[int] | None = None) -> dict:
    """Purity on the input sentences at `indices` (all of them when None)."""
    from repair.purity.run import run_purity

    if not (out / "summary.json").exists():
        sentences = read_text_lines(data.sentences)
        if indices is None:
            indices = list(range(len(sentences)))
        start = time.perf_counter()
        parser, translator = run.parser(), run.translator(checkpoint)
        run_purity(
            [sentences[i] for i in indices], parser, translator, out, init_seconds=time.perf_counter() - start,
            source=str(data.sentences), lines=[i + 1 for i in indices], **purity_kwargs(run.cfg, data.dir)
        )
    return {"summary": read_json(out / "summary.json"), "issues": read_issues(out / "issues.jsonl")}


def stage_review(run: Run, out: Path, issues: list[dict], data: Data) -> tuple[list[dict], dict]:
    from repair.review.store import CorrectionStore, load_corrections, review_stats
    from repair.verify import by_relation

    cfg = run.cfg
    done = out / "done.json"
    corrections_path = out / "corrections.jsonl"
    by_id = {i["id"]: i for i in issues}
    if not done.exists():
        method = cfg.review.name
        extra = {}
        if method == "oracle":
            from repair.data.demo import load_references
            from repair.review.oracle import oracle_review

            if data.references is None:
                raise UserError(
                    f"review=oracle needs reference translations, and data={cfg.data.name} has none: "
                    "use review=file or review=web"
                )
            result = oracle_review(issues, load_references(data.references), out)
            extra = {"needs_person": result.get("needs_person", 0)}
        elif method == "file":
            from repair.review.sheet import file_review

            # raises ReviewPending, with what to fill in and where, until the sheet is filled in
            file_review(issues, out, rerun_hint=rerun_command())
        elif method == "web":
            from repair.review.web import serve_review

            progress = out / "progress.json"
            finished = progress.exists() and read_json(progress).get("finished")
            if not finished:  # a review finished with `python -m repair.review` is not served again
                serve_review(
                    issues, out, host=cfg.review.host, port=cfg.review.port, open_browser=cfg.review.open_browser,
                    public=cfg.review.get("public", False), hosts=list(cfg.review.get("hosts") or []),
                )
        else:
            raise UserError(f"review={method}: unknown review method (oracle | file | web)")
        with CorrectionStore(out, issues) as store:  # corrections.jsonl rebuilt from the judgment log if they disagree
            stats = {**review_stats(out, issues), **extra}
            references = None
            if data is not None and data.references is not None:
                from repair.data.demo import load_references

                references = load_references(data.references)
            stats["by_relation"] = by_relation(issues, store.latest, references)
        write_json_atomic(done, {"method": method, "stats": stats, "corrections_sha256": sha256(corrections_path)})
    state = read_json(done)
    if sha256(corrections_path) != state["corrections_sha256"]:
        raise UserError(
            f"{corrections_path} changed after the review ended, and later stages were built on the old "
            f"content. Nothing is lost; to use the new corrections, delete {done} and the folders after it "
            f"({out.parent / 'finetune'}, {out.parent / 'verify'}) and rerun."
        )
    if corrections_path.exists() and corrections_path.stat().st_size:
        corrections, notes = load_corrections(corrections_path, by_id)
    else:
        corrections, notes = [], {}
    return corrections, {"method": state["method"], **state["stats"], "notes": notes}


def finetune_pairs(cfg: DictConfig, corrections: list[dict], data: Data, test_dir: Path | None = None,
                   issues: list[dict] = ()) -> list[tuple[str, str]]:
    pairs = [(c["source"], c["correction"]) for c in corrections] * cfg.finetune.repeat
    keep = cfg.finetune.get("keep") or 0
    if keep and test_dir is not None:
        from repair.purity.run import TRANSLATIONS
        from repair.purity.translators import read_table

        table_path = test_dir / TRANSLATIONS
        if table_path.exists():
            # Texts Purity found consistent keep the model's own translation, so that learning
            # the corrections does not change how the rest of the phrases are translated.
            flagged = {c["source"] for c in corrections} | {s["source"] for i in issues for s in i["sides"]}
            table = read_table(table_path, empty_ok=True)  # the model's own output may be empty
            consistent = [(src, tr) for src, tr in table.items() if src not in flagged and tr]
            pairs += random.Random(cfg.seed).sample(consistent, min(keep, len(consistent)))
        else:
            log.warning("finetune.keep: %s is missing (a test stage from an older version); nothing kept", table_path)
    if cfg.finetune.replay:
        from repair.data.prepare import read_clean_pairs

        train = read_clean_pairs(data.dir, "train")
        rng = random.Random(cfg.seed)
        pairs += rng.sample(train, min(cfg.finetune.replay, len(train)))
    random.Random(cfg.seed).shuffle(pairs)
    return pairs


def stage_finetune(run: Run, out: Path, checkpoint: "ModelFiles", corrections: list[dict], data: Data,
                   test_dir: Path | None = None, issues: list[dict] = ()) -> dict:
    from repair.data.prepare import read_clean_pairs
    from repair.nmt.finetune import finetune_model

    result_path = out / "result.json"
    if not result_path.exists():
        ft = run.cfg.finetune
        result = finetune_model(
            checkpoint,
            finetune_pairs(run.cfg, corrections, data, test_dir, issues),
            read_clean_pairs(data.dir, "valid"),
            out,
            lr=ft.lr,
            patience=ft.patience,
            max_epoch=ft.max_epoch,
            seed=run.cfg.seed,
            device=run.cfg.device,
            threads=run.cfg.model.get("threads"),
        )
        result = {k: (str(v) if isinstance(v, Path) else v) for k, v in result.items()}
        write_json_atomic(result_path, result)
    return read_json(result_path)


def translate_cached(translator, texts: list[str], path: Path) -> list[str]:
    if path.exists():
        cached = read_text_lines(path)
        if len(cached) == len(texts):
            return cached
    out = translator.translate(texts)
    write_text_atomic(path, "".join(t.replace("\n", " ") + "\n" for t in out))
    return out


@dataclass
class Heldout:
    sentences: list[str]  # the held-out input sentences: never tested before verify, never reviewed or fine-tuned on
    lines: list[int]  # their line numbers in the input
    references: dict | None  # the data's reference translations (demo), to judge translations by


def heldout_purity(run: Run, out: Path, model: "ModelFiles", data: Data, heldout: Heldout) -> Path:
    from repair.purity.run import run_purity

    if not (out / "summary.json").exists():
        run_purity(heldout.sentences, run.parser(), run.translator(model), out,
                   source=str(data.sentences), lines=heldout.lines, **purity_kwargs(run.cfg, data.dir))
    return out


def compare_models(heldout_dirs: tuple[Path, Path] | None, bleu_files: tuple[Path, Path], test_zh: list[str],
                   test_en: list[str], references: dict | None, worst: int) -> dict:
    """Held-out Purity before/after and the classes of changed translations, from the files two
    models' runs wrote: Purity folders on the held-out sentences and BLEU test set translations."""
    from repair.purity.run import TRANSLATIONS
    from repair.purity.translators import read_table
    from repair.verify import classify_changes, heldout_comparison

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


def stage_verify(run: Run, out: Path, base: "ModelFiles", finetuned: "ModelFiles", corrections: list[dict], test: dict, data: Data,
                 indices: list[int] | None = None, heldout: Heldout | None = None,
                 heldout_base_dir: Path | None = None) -> dict:
    """Fixes, BLEU, Purity again on the tested sentences, Purity on the held-out ones, changed translations.

    heldout_base_dir: the base model's Purity run on the held-out sentences when one exists (the
    previous cycle's fine-tuned model is this cycle's base).
    """
    from repair.purity.run import run_purity
    from repair.verify import bleu_significance, purity_regressions, verify_fixes

    verify_path = out / "verify.json"
    if verify_path.exists():
        return read_json(verify_path)
    cfg = run.cfg
    threshold = min(cfg.purity.thresholds)
    new_model = run.translator(finetuned)
    fixes = verify_fixes(
        corrections, new_model.translate([c["source"] for c in corrections]) if corrections else [], cfg.purity.unit,
        threshold=threshold,
    )
    write_json_atomic(out / "fixes.json", fixes)
    log.info("fixed %s of %s corrections (%s within d = %s)", fixes["fixed"], fixes["corrections"],
             fixes["fixed_within_d"], threshold)

    from repair.data.prepare import read_clean_pairs

    test_en, test_zh = map(list, zip(*read_clean_pairs(data.dir, "test")))
    bleu_files = (out / "bleu" / "base.txt", out / "bleu" / "finetuned.txt")
    hyp_base = translate_cached(run.translator(base), test_en, bleu_files[0])
    hyp_new = translate_cached(new_model, test_en, bleu_files[1])
    bleu = bleu_significance(
        test_zh, hyp_base, hyp_new, n_samples=cfg.verify.bootstrap_samples, alpha=cfg.verify.alpha
    )
    log.info("BLEU %.2f -> %.2f (p = %.3f)", bleu["before"], bleu["after"], bleu["p_value"])

    purity_dir = out / "purity"
    if not (purity_dir / "summary.json").exists():
        sentences = read_text_lines(data.sentences)
        if indices is None:
            indices = list(range(len(sentences)))
        run_purity([sentences[i] for i in indices], run.parser(), new_model, purity_dir,
                   source=str(data.sentences), lines=[i + 1 for i in indices], **purity_kwargs(cfg, data.dir))
    after_issues = read_issues(purity_dir / "issues.jsonl")

    heldout_dirs = None
    if heldout is not None:
        before_dir = heldout_base_dir or heldout_purity(run, out / "heldout_base", base, data, heldout)
        heldout_dirs = (before_dir, heldout_purity(run, out / "heldout_finetuned", finetuned, data, heldout))
    compared = compare_models(heldout_dirs, bleu_files, test_zh, test_en, heldout.references if heldout else None,
                              cfg.verify.worst)
    if "heldout" in compared:
        from repair.purity.run import TRANSLATIONS
        from repair.purity.translators import read_table

        h = compared["heldout"]
        # held-out sentences are never fine-tuned on; their phrases may be, through corrections or replay
        tuned = {src for src, _ in finetune_pairs(cfg, corrections, data, out.parent / "test", test["issues"])}
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


# ---------------------------------------------------------------- the loop


def run_loop(cfg: DictConfig, run_dir: Path) -> Path:
    from repair.report import write_report

    check_translator(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    check_run_config(run_dir, cfg)
    seconds_path = run_dir / "seconds.json"
    run = Run(cfg, run_dir, read_json(seconds_path) if seconds_path.exists() else {})
    resumed = set(run.seconds)

    with run.stage("prepare"):
        data = stage_prepare(cfg)
    with run.stage("train"):
        base = stage_train(run, data)

    sentences = read_text_lines(data.sentences)
    held, rest = heldout_split(sentences, float(cfg.purity.get("holdout") or 0), str(data.sentences))
    if not rest:
        raise UserError(f"{data.sentences}: no sentence left to test after holding out "
                        f"purity.holdout={cfg.purity.holdout} of {len(held)}; lower purity.holdout")
    heldout = None
    if held:
        from repair.data.demo import load_references

        heldout = Heldout([sentences[i] for i in held], [i + 1 for i in held],
                          load_references(data.references) if data.references else None)
        record = {"input": str(data.sentences), "share": cfg.purity.holdout, "sentences": len(held),
                  "lines": heldout.lines}
        path = run_dir / "heldout.json"
        if not path.exists() or read_json(path) != record:  # a resumed run leaves its record as it was
            write_json_atomic(path, record)
        log.info("held out %s of %s sentences of %s (purity.holdout=%s)", len(held), len(held) + len(rest),
                 data.sentences, cfg.purity.holdout)

    cycles = []
    exhausted = None
    checkpoint = base
    for k in range(1, cfg.cycles + 1):
        cdir = run_dir / f"cycle{k}"
        indices = cycle_slice(run_dir, k, rest, cfg.purity.get("per_cycle"), cfg.cycles)
        if not indices:
            exhausted = {"after_cycle": k - 1, "tested": sum(len(c["slice"]) for c in cycles), "sentences": len(rest)}
            log.warning("the input is used up: cycles 1-%s tested all %s sentences of %s that are not held out; "
                        "the loop stops", k - 1, len(rest), data.sentences)
            break
        log.info("cycle %s tests %s sentences (lines %s of %s)", k, len(indices), line_span(indices), data.sentences)
        with run.stage("test"):
            test = stage_test(run, cdir / "test", checkpoint, data, indices)
        log.info("Purity: %s issues in %s pairs", len(test["issues"]), test["summary"].get("pairs"))
        entry = {"cycle": k, "slice": indices, "test": test}
        with run.stage("review"):
            corrections, review = stage_review(run, cdir / "review", test["issues"], data)
        log.info("review: %s corrections", len(corrections))
        if not corrections:
            cycles.append({**entry, "review": review, "corrections": [], "finetune": None, "verify": None})
            log.warning("no corrections: nothing to fine-tune on; the loop stops at cycle %s", k)
            break
        with run.stage("finetune"):
            ft = stage_finetune(run, cdir / "finetune", checkpoint, corrections, data, cdir / "test", test["issues"])
        previous = cycles[-1]["verify"] if cycles else None
        with run.stage("verify"):
            verify = stage_verify(
                run, cdir / "verify", checkpoint, checkpoint.with_checkpoint(ft["best_checkpoint"]), corrections, test,
                data, indices, heldout,
                Path(previous["heldout_dirs"][1]) if previous and previous.get("heldout_dirs") else None,
            )
        cycles.append({**entry, "review": review, "corrections": corrections, "finetune": ft, "verify": verify})
        checkpoint = checkpoint.with_checkpoint(ft["best_checkpoint"])

    overall = None
    verified = [c for c in cycles if c["verify"]]
    if len(verified) > 1:  # the first base model against the last fine-tuned one
        from repair.data.prepare import read_clean_pairs

        first, last = verified[0]["verify"], verified[-1]["verify"]
        test_en, test_zh = map(list, zip(*read_clean_pairs(data.dir, "test")))
        dirs = (Path(first["heldout_dirs"][0]), Path(last["heldout_dirs"][1])) if first.get("heldout_dirs") else None
        bleu_files = (run_dir / f"cycle{verified[0]['cycle']}/verify/bleu/base.txt",
                      run_dir / f"cycle{verified[-1]['cycle']}/verify/bleu/finetuned.txt")
        overall = compare_models(dirs, bleu_files, test_zh, test_en, heldout.references if heldout else None,
                                 cfg.verify.worst)

    with run.stage("report"):
        path = write_report(run_dir, cfg, data, Path(base.checkpoint), cycles, run.seconds, overall=overall, exhausted=exhausted)
    if resumed:
        log.info("resumed: stages %s were already done", ", ".join(sorted(resumed)))
    return path


def rerun_command() -> str:
    import sys

    return "python -m repair.loop " + " ".join(sys.argv[1:])


def default_run_dir(cfg: DictConfig) -> Path:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hc = HydraConfig.get()
    explicit = any(o.startswith("run_dir=") for o in hc.overrides.task)
    if hc.mode == RunMode.MULTIRUN and not explicit:
        return Path(hc.runtime.output_dir)  # each job of a sweep in its own folder
    return Path(cfg.run_dir)


# conf/loop.yaml, not config.yaml: fairseq registers its own schema as "config" in Hydra's store
@hydra.main(version_base=None, config_path="../conf", config_name="loop")
@exit_on_user_error
def main(cfg: DictConfig) -> str:
    path = run_loop(cfg, default_run_dir(cfg))
    print(f"report: {path}", flush=True)
    return str(path)  # a multirun's StudyCallback collects the jobs' reports


if __name__ == "__main__":
    exit_on_user_error(check_folder_overrides)(sys.argv[1:], ["run_dir"])  # Hydra makes run_dir before main runs
    main()
