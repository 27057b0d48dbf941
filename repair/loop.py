"""`python -m repair.loop`: prepare -> train/load -> test -> review -> fine-tune -> verify -> report.

One run is one folder. Every stage (repair.stages.*) writes its outputs there and is skipped when
they exist, so rerunning the same command resumes at the first unfinished stage. This module only
orders the stages and hands each its config group's plain values.
"""

from __future__ import annotations

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
from repair.fileio import check_folder_overrides, flat, read_json, write_json_atomic
from repair.purity.config import check_renamed, renamed
from repair.stages import Translators

if TYPE_CHECKING:
    from repair.stages.finetune import FinetuneSettings

log = logging.getLogger("repair.loop")


# ---------------------------------------------------------------- run folder


def plain(node: DictConfig) -> dict:
    """A config node as the plain values the functions below the entry point take."""
    return OmegaConf.to_container(node, resolve=True)


def model_setup(cfg: DictConfig, checkpoint) -> dict:
    """The report's model: the config group's options for a model trained here; for one brought along
    (`model.checkpoint`), its path and folder name, not the group's training options, which it was not made with."""
    if cfg.model.get("checkpoint"):
        given = Path(str(cfg.model.checkpoint))
        name = (given if given.is_dir() else given.parent).name or str(given)
        return {"name": name, "checkpoint": str(given), "trained_here": False, "base_checkpoint": str(checkpoint)}
    return {**plain(cfg.model), "trained_here": True, "base_checkpoint": str(checkpoint)}


def check_run_config(run_dir: Path, cfg: DictConfig) -> list[str]:
    """Refuse to mix a run folder with another configuration; name the first key that differs. Returns the keys of
    `resume_before_finetune` that changed in a folder no fine-tune has used yet (taken, and recorded)."""
    current = OmegaConf.to_container(cfg, resolve=True)
    path = run_dir / "config.json"
    if not path.exists():
        write_json_atomic(path, current)
        return []
    saved = read_json(path)
    ignored = tuple(cfg.resume_ignores)
    a = {renamed(k, "purity.") or k: v for k, v in flat(saved).items()}  # a run from before a key was renamed
    b = flat(current)
    before_finetune = not any(run_dir.glob("cycle*/finetune/result.json"))
    changed = []
    for key in sorted(set(a) | set(b)):
        if any(key == k or key.startswith(k + ".") for k in ignored):
            continue
        if key not in a and key in ADDED_LATER:  # a run from before them: a model whose family does not read them
            continue
        if a.get(key) != b.get(key) and before_finetune and key in tuple(cfg.get("resume_before_finetune") or ()):
            changed.append(key)  # encodes only the fine-tune's targets; no fine-tune used the old value
            continue
        if a.get(key) != b.get(key) and key in tuple(cfg.get("resume_before_test") or ()) and \
                not any(run_dir.glob("cycle*/test/summary.json")):
            changed.append(key)  # the model's preprocessing, before any sentence was tested with it (the model check)
            continue
        if a.get(key) != b.get(key):
            raise UserError(
                f"{run_dir} holds a run with {key}={a.get(key)!r}, this command has {key}={b.get(key)!r}. "
                f"Use another run_dir=... for the new configuration, or rerun with {key}={a.get(key)!r} to resume."
            )
    if changed:
        log.info("%s: %s changed before any fine-tune (or test); the stages before it are kept", run_dir,
                 ", ".join(f"{k}={b.get(k)!r}" for k in changed))
        write_json_atomic(path, current)
    return changed


# keys added later (the finetune ones mostly read only by an adapter fine-tune; the translator ones those of a runtime
# choice, a family's that has two): a run folder written before they existed resumes
ADDED_LATER = ("finetune.adapter", "finetune.lora_rank", "finetune.lora_alpha", "finetune.lora_targets",
               "finetune.lora_lr", "finetune.loss_rise", "finetune.lr_from_model", "finetune.scope_words", "finetune.scope_enforce",
               "translator.runtime", "translator.max_sentences", "translator.compute_type", "translator.min_identical",
               "translator.cache_dir", "translator.workers")


class StopAfter(Exception):
    """Raised when the stage run_loop was asked to stop after is done (its outputs and seconds written)."""


@dataclass
class Run:
    """One run folder: the time each stage took, summed over resumes (seconds.json)."""

    dir: Path
    seconds: dict = field(default_factory=dict)
    stop_after: str | None = None  # a stage's name: StopAfter once it is done (repair.bench.scale: a process a stage)

    @contextmanager
    def stage(self, name: str):
        log.info("== %s", name)
        start = time.perf_counter()
        yield
        self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 2)
        write_json_atomic(self.dir / "seconds.json", self.seconds)
        if name == self.stop_after:
            raise StopAfter(name)


def finetune_settings(cfg: DictConfig, heldout=None) -> "FinetuneSettings":
    """The `finetune` group's settings; the held-out sentences are never fine-tuned on."""
    from repair.stages.finetune import settings_from_config

    return settings_from_config(plain(cfg.finetune), seed=cfg.seed, device=cfg.device,
                                threads=cfg.model.get("threads"), exclude=heldout.sentences if heldout else (),
                                stop_tokens=cfg.purity.get("stop_tokens") or ())


def run_loop(cfg: DictConfig, run_dir: Path, command: str = "python -m repair.loop", stop_after: str | None = None) -> Path:
    """prepare -> train -> (test -> review -> fine-tune -> verify) x cycles -> report, in run_dir.
    command: the command line that reproduces the run, for the report. stop_after: a stage's name; StopAfter is
    raised when it is first done (the stages before it resumed or run, none after it)."""
    from repair.heldout import cycle_slice, hold_out, line_span
    from repair.report import write_report
    from repair.stages import finetune, prepare, review, test, train, verify

    translators = Translators(plain(cfg.translator), device=cfg.device, threads=cfg.model.get("threads"))
    run_dir.mkdir(parents=True, exist_ok=True)
    check_run_config(run_dir, cfg)
    seconds_path = run_dir / "seconds.json"
    run = Run(run_dir, read_json(seconds_path) if seconds_path.exists() else {}, stop_after)
    resumed = set(run.seconds)
    # a model brought along: model.checkpoint, or translator.checkpoint (a file or a model folder)
    brought = cfg.model.get("checkpoint") or cfg.translator.get("checkpoint")

    with run.stage("prepare"):  # a model brought along has its own preprocessing: the corpus is only cleaned
        data = prepare.run(plain(cfg.data), encode=not brought and translators.family.needs_encoded_corpus,
                           purity_input=cfg.purity.input)
    with run.stage("train"):
        base = train.run(run_dir, data.dir, translators, plain(cfg.model), brought, cfg.checkpoint_dir, cfg.seed,
                         cfg.device)
    heldout, rest = hold_out(run_dir, data.sentences, float(cfg.purity.get("holdout") or 0),
                             data.sentence_references)
    purity = test.make_purity(plain(cfg.purity), plain(cfg.parser), translators, data.dir)
    verify_settings = verify.VerifySettings(**{k: cfg.verify[k] for k in ("bootstrap_samples", "alpha", "worst")})

    cycles = []
    exhausted = None
    model = base
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
            tested = test.run(cdir / "test", model, data, purity, indices, plain(cfg.purity).get("suggest"))
        log.info("Purity: %s issues in %s pairs", len(tested["issues"]), tested["summary"].get("pairs"))
        entry = {"cycle": k, "slice": indices, "test": tested}
        with run.stage("review"):
            corrections, reviewed = review.run(cdir / "review", tested["issues"], plain(cfg.review),
                                               data.reference_table, rerun_command(),
                                               review.memory_suggester(translators(model), cfg.purity.stop_tokens,
                                                                       data.dir), review.phrase_aligner(data.dir))
        log.info("review: %s corrections", len(corrections))
        if not corrections:
            cycles.append({**entry, "review": reviewed, "corrections": [], "finetune": None, "verify": None})
            log.warning("no corrections: nothing to fine-tune on; the loop stops at cycle %s", k)
            break
        with run.stage("finetune"):
            ft = finetune.run(cdir / "finetune", model, corrections, data.dir, finetune_settings(cfg, heldout),
                              cdir / "test", tested["issues"], translators(model), translators,
                              translators.family_of(model))
        with run.stage("verify"):
            verified = verify.run(cdir / "verify", model, cdir / "finetune", corrections, tested, data, purity,
                                  verify_settings, indices, heldout, cycles[-1]["verify"] if cycles else None)
        cycles.append({**entry, "review": reviewed, "corrections": corrections, "finetune": ft, "verify": verified})
        model = model.with_checkpoint(ft["best_checkpoint"])

    overall = run_overall(cfg, run_dir, cycles, data, heldout, lambda: translators(model), verify_settings)
    with run.stage("report"):
        path = write_report(run_dir, cycles, run.seconds, thresholds=list(cfg.purity.thresholds), setup={
            "model": model_setup(cfg, base.checkpoint),
            "data": {**plain(cfg.data), "sentences": str(data.sentences)},
            "parser": plain(cfg.parser),
            "seed": cfg.seed,
            "command": command,
        }, overall=overall, exhausted=exhausted, resumed=sorted(resumed))
    if resumed:
        log.info("resumed: stages %s were already done", ", ".join(sorted(resumed)))
    return path


def run_overall(cfg: DictConfig, run_dir: Path, cycles: list[dict], data, heldout, translator, verify_settings):
    """The run's measures over its verified cycles: every cycle's corrections and fine-tuning sources (None: none).
    translator(): the last model's, built only where there are measures."""
    from repair.stages import finetune, verify

    done = [c for c in cycles if c["verify"]]
    overall = verify.compare_run(run_dir, done, data, heldout, verify_settings.worst)
    if overall is not None:
        tuned = set().union(*(finetune.read_sources(run_dir / f"cycle{c['cycle']}" / "finetune") for c in done))
        overall.update(verify.run_measures(done, run_dir, data, heldout, translator(), tuned,
                                           tuple(cfg.purity.stop_tokens), verify_settings, overall.get("heldout")))
    return overall


def rerun_command() -> str:
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


# conf/loop.yaml, not config.yaml: a model library registers its own schema as "config" in Hydra's store
@hydra.main(version_base=None, config_path="../conf", config_name="loop")
@exit_on_user_error
def main(cfg: DictConfig) -> str:
    path = run_loop(cfg, default_run_dir(cfg), command_line())
    print(f"report: {path}", flush=True)
    return str(path)  # a multirun's StudyCallback collects the jobs' reports


if __name__ == "__main__":
    exit_on_user_error(check_renamed)(sys.argv[1:], "purity.")
    exit_on_user_error(check_folder_overrides)(sys.argv[1:], ["run_dir"])  # Hydra makes run_dir before main runs
    main()
