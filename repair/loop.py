"""`python -m repair.loop`: prepare -> train/load -> test -> review -> fine-tune -> verify -> report.

One run is one folder. Every stage writes its outputs there and is skipped when they exist, so
rerunning the same command resumes at the first unfinished stage. This module only orders the
stages and maps the configuration onto the functions that do the work.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from omegaconf import DictConfig, OmegaConf

from repair.errors import UserError, exit_on_user_error
from repair.fileio import check_folder_overrides, read_json, read_text_lines, write_json_atomic
from repair.heldout import Heldout, cycle_slice, heldout_split, line_span
from repair.issues import read_issues
from repair.stages import Data, Purity

if TYPE_CHECKING:
    from repair.nmt.preprocessing import ModelFiles
    from repair.stages.finetune import FinetuneSettings

log = logging.getLogger("repair.loop")


# ---------------------------------------------------------------- run folder


def plain(node: DictConfig) -> dict:
    """A config node as the plain values the functions below the entry point take."""
    return OmegaConf.to_container(node, resolve=True)


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
            self._translators[key] = make_translator(plain(self.cfg.translator), **model_overrides(self.cfg, model))
        return self._translators[key]

    def parser(self):
        if self._parser is None:
            from repair.purity.parsers import make_parser

            self._parser = make_parser(plain(self.cfg.parser))
        return self._parser

    def purity(self, data_dir: Path | None = None) -> Purity:
        """Purity runs with this run's parser, translators and settings (the replacement relation: data_dir's files)."""
        return Purity(self.parser, self.translator, purity_kwargs(self.cfg, data_dir))


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


def model_checkpoint(cfg: DictConfig) -> str | None:
    """The model brought along: model.checkpoint, or translator.checkpoint (a file or a model folder)."""
    return cfg.model.get("checkpoint") or cfg.translator.get("checkpoint")


def stage_prepare(cfg: DictConfig) -> Data:
    from repair.data.prepare import prepare_data

    data_dir = Path(cfg.data.dir)
    sources = None
    if cfg.data.name == "demo":
        from repair.data.demo import build_demo

        build_demo(data_dir, **plain(cfg.data.build))
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
                 **plain(cfg.data.prepare))
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

        checkpoint = train_model(data.dir, Path(cfg.checkpoint_dir), plain(cfg.model), seed=cfg.seed,
                                 device=cfg.device)
    options = {k: v for k, v in plain(cfg.translator).items()
               if k in OPTION_KEYS}
    model = load_model_files(checkpoint, data.dir, **options)
    log.info("model %s; %s; %s", model.checkpoint, model.src.describe(), model.tgt.describe())
    write_json_atomic(marker, {"checkpoint": model.checkpoint, "sha256": sha256(Path(model.checkpoint)),
                               "files": model.to_dict()})
    return model


# the `purity` group's keys run_purity takes as they are
PURITY_KEYS = ("thresholds", "unit", "skip_latin", "max_words", "min_content_words", "max_sentence_words", "stopwords",
               "stop_tokens")


def purity_kwargs(cfg: DictConfig, data_dir: Path | None = None) -> dict:
    """The `purity` group's settings for run_purity (the loop's own keys left out). The replacement relation
    reads the data's lexicon (the demo writes one) and its cleaned training English unless given others."""
    p = plain(cfg.purity)
    relations = list(p.get("relations") or ["rti"])
    options = {}
    if "replace" in relations:
        replace = p.get("replace") or {}
        if data_dir is not None:
            if not replace.get("lexicon") and (data_dir / "lexicon.jsonl").is_file():
                replace["lexicon"] = str(data_dir / "lexicon.jsonl")
            if not replace.get("corpus") and (data_dir / "clean" / "train.en").is_file():
                replace["corpus"] = str(data_dir / "clean" / "train.en")
        options["replace"] = replace
    return {**{k: tuple(p[k]) if isinstance(p[k], list) else p[k] for k in PURITY_KEYS},
            "relations": relations, "relation_options": options}


def stage_test(run: Run, out: Path, checkpoint: "ModelFiles", data: Data, indices: list[int] | None = None) -> dict:
    """Purity on the input sentences at `indices` (all of them when None)."""
    if not (out / "summary.json").exists():
        sentences = read_text_lines(data.sentences)
        if indices is None:
            indices = list(range(len(sentences)))
        run.purity(data.dir).run(out, checkpoint, [sentences[i] for i in indices], [i + 1 for i in indices],
                                 str(data.sentences))
    return {"summary": read_json(out / "summary.json"), "issues": read_issues(out / "issues.jsonl")}


def finetune_settings(cfg: DictConfig, heldout: Heldout | None = None) -> "FinetuneSettings":
    from repair.stages.finetune import settings_from_config

    return settings_from_config(plain(cfg.finetune), seed=cfg.seed, device=cfg.device,
                                threads=cfg.model.get("threads"), exclude=heldout.sentences if heldout else ())


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
        references = data.reference_table if data is not None else None
        if method == "oracle":
            from repair.review.oracle import oracle_review

            if references is None:
                raise UserError(
                    f"review=oracle needs reference translations, and data={cfg.data.name} has none: "
                    "use review=file or review=web"
                )
            result = oracle_review(issues, references, out)
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
            stats = {**review_stats(out, issues), **extra, "by_relation": by_relation(issues, store.latest, references)}
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


# ---------------------------------------------------------------- the loop


def run_loop(cfg: DictConfig, run_dir: Path, command: str = "python -m repair.loop") -> Path:
    """command: the command line that reproduces the run, for the report."""
    from repair.report import write_report
    from repair.stages.finetune import finetune_pairs, stage_finetune
    from repair.stages.verify import VerifySettings, compare_models, stage_verify

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
        heldout = Heldout([sentences[i] for i in held], [i + 1 for i in held], data.sentence_references)
        record = {"input": str(data.sentences), "share": cfg.purity.holdout, "sentences": len(held),
                  "lines": heldout.lines}
        path = run_dir / "heldout.json"
        if not path.exists() or read_json(path) != record:  # a resumed run leaves its record as it was
            write_json_atomic(path, record)
        log.info("held out %s of %s sentences of %s (purity.holdout=%s)", len(held), len(held) + len(rest),
                 data.sentences, cfg.purity.holdout)

    verify_settings = {k: cfg.verify[k] for k in ("bootstrap_samples", "alpha", "worst")}
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
            ft = stage_finetune(cdir / "finetune", checkpoint, corrections, data.dir, finetune_settings(cfg, heldout),
                                cdir / "test", test["issues"], run.translator(checkpoint), run.translator)
        previous = cycles[-1]["verify"] if cycles else None
        with run.stage("verify"):
            verify = stage_verify(
                cdir / "verify", checkpoint, checkpoint.with_checkpoint(ft["best_checkpoint"]), corrections, test,
                data, run.purity(data.dir), VerifySettings(**verify_settings),
                lambda: {src for src, _ in finetune_pairs(finetune_settings(cfg, heldout), corrections, data.dir, cdir / "test",
                                                          test["issues"])},
                indices, heldout,
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
                                 verify_settings["worst"])
        from repair.stages.verify import run_measures

        tuned = {src for c in verified for src, _ in finetune_pairs(
            finetune_settings(cfg, heldout), c["corrections"], data.dir, run_dir / f"cycle{c['cycle']}/test",
            c["test"]["issues"])}
        overall.update(run_measures(verified, run_dir, data, heldout, run.translator(checkpoint), tuned,
                                    tuple(cfg.purity.stop_tokens), VerifySettings(**verify_settings),
                                    overall.get("heldout")))

    with run.stage("report"):
        path = write_report(run_dir, cycles, run.seconds, thresholds=list(cfg.purity.thresholds), setup={
            "model": {**plain(cfg.model), "base_checkpoint": str(base.checkpoint)},
            "data": {**plain(cfg.data), "sentences": str(data.sentences)},
            "parser": plain(cfg.parser),
            "seed": cfg.seed,
            "command": command,
        }, overall=overall, exhausted=exhausted)
    if resumed:
        log.info("resumed: stages %s were already done", ", ".join(sorted(resumed)))
    return path


def rerun_command() -> str:
    import sys

    return "python -m repair.loop " + " ".join(sys.argv[1:])


def command_line() -> str:
    """The command that reproduces this run: the loop with the overrides it was given."""
    from hydra.core.hydra_config import HydraConfig

    return " ".join(["python -m repair.loop", *HydraConfig.get().overrides.task])


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
    path = run_loop(cfg, default_run_dir(cfg), command_line())
    print(f"report: {path}", flush=True)
    return str(path)  # a multirun's StudyCallback collects the jobs' reports


if __name__ == "__main__":
    exit_on_user_error(check_folder_overrides)(sys.argv[1:], ["run_dir"])  # Hydra makes run_dir before main runs
    main()
