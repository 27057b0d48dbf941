"""`python -m repair.purity input=SENTENCES.txt parser=ptb|spacy|stanza translator=table|fairseq|ctranslate2 out=DIR`."""

from __future__ import annotations

import logging
import sys
import time

import hydra
from omegaconf import DictConfig, OmegaConf

from repair.errors import UserError, exit_on_user_error
from repair.fileio import check_folder_overrides, read_text_lines
from repair.purity.config import check_renamed, run_settings
from repair.purity.model_check import run_model_check
from repair.purity.parsers import make_parser
from repair.purity.parsers.process import parser_in_its_own_process
from repair.purity.parsers.ptb import PtbParser
from repair.purity.run import begin_sentences, run_purity, settled
from repair.edit.scoped import served
from repair.purity.translators import fidelity_line, make_translator

log = logging.getLogger("repair.purity")


def summary_table(summary: dict) -> str:
    """The run's figures as the paper's Tables III and V lay them out."""
    seconds = summary["seconds"]
    rows = [
        ("sentences", summary["sentences"]),
        ("blank lines skipped", summary["blank_lines_skipped"]),
        ("long sentences skipped", summary["long_sentences_skipped"]),
        ("RTIs", summary["rtis"]),
        ("pairs", summary["pairs"]),
        *((f"{name}: cases, issues at d > {min(f['issues'], key=int)}", f"{f['cases']}, {f['issues'][min(f['issues'], key=int)]}")
          for name, f in summary.get("by_relation", {}).items() if len(summary.get("by_relation", {})) > 1),
        ("texts translated", summary["texts"]),
        ("characters translated", summary["characters_translated"]),
        ("pairs skipped (Latin letters)", summary["skipped_pairs"]),
        *((f"issues at d > {d}", n) for d, n in summary["issues"].items()),
        *((f"seconds: {stage.replace('_', ' ')}", f"{s:.2f}") for stage, s in seconds.items()),
        *fidelity_rows(summary.get("translator") or {}),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def fidelity_rows(translator: dict) -> list[tuple[str, str]]:
    """The compute type a CTranslate2 translator used and how its translations agree with fairseq's."""
    fidelity = translator.get("fidelity")
    if not fidelity:
        return []
    return [("translator", fidelity_line(fidelity))]


@exit_on_user_error
def purity(cfg: DictConfig, out_dir: str) -> dict:
    """The run. With an input file, spaCy loads in a process of its own from the start (repair.purity.parsers.
    process; else the parser loads here after the translator), and the translator is built and begins the
    sentences (CTranslate2, a cached conversion: in its own threads) while the parser loads and parses them: the
    cores a start-up leaves idle translate (the same trees and translations, each text once)."""
    group = OmegaConf.to_container(cfg, resolve=True)
    settings = run_settings(group)
    parser_cfg = OmegaConf.to_container(cfg.parser, resolve=True)
    started = time.perf_counter()
    translator = begun = own = None
    try:
        if cfg.input is not None:
            own = parser_in_its_own_process(parser_cfg)  # forked before the translator starts a thread
            translator = build_translator(cfg)
            sentences, source, lines = read_text_lines(cfg.input), str(cfg.input), None
            run_model_check(translator, sentences, cfg.get("model_check") or "warn")
            begun = begin_sentences(translator, sentences, settings.get("max_sentence_words", 200))
        with settled(begun):
            parser = own or make_parser(parser_cfg)
        if translator is None:
            if not isinstance(parser, PtbParser):
                raise UserError(f"input= is required with parser={cfg.parser.name}: a UTF-8 file of English "
                                "sentences, one per line")
            sentences, source, lines = parser.sentences, str(parser.path), parser.lines
            translator = build_translator(cfg)
            run_model_check(translator, sentences, cfg.get("model_check") or "warn")
        init_seconds = time.perf_counter() - started
        summary = run_purity(sentences, parser, translator, out_dir, init_seconds=init_seconds, source=source,
                             lines=lines, suggest=group.get("suggest"), begun=begun, **settings)
    finally:
        if own is not None:
            own.close(now=own.process is None)  # not yet asked for trees: a failed run, whose error need not wait
    print(summary_table(summary), flush=True)
    return summary


def build_translator(cfg: DictConfig):
    translator_cfg = OmegaConf.to_container(cfg.translator, resolve=True)
    return served(translator_cfg, make_translator(translator_cfg))  # a scoped edit with its base model


@hydra.main(version_base=None, config_path="../../conf", config_name="purity_app")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    # The run folder is `out` (a multirun job: its own folder under `out`).
    purity(cfg, HydraConfig.get().runtime.output_dir)


@exit_on_user_error
def cli() -> None:
    check_renamed(sys.argv[1:])
    check_folder_overrides(sys.argv[1:], ["out"])  # Hydra makes `out` before main runs
    main()


if __name__ == "__main__":
    cli()
