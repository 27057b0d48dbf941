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
from repair.purity.parsers import make_parser
from repair.purity.parsers.ptb import PtbParser
from repair.purity.run import run_purity
from repair.purity.scoped import served
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
    started = time.perf_counter()
    parser = make_parser(OmegaConf.to_container(cfg.parser, resolve=True))
    translator_cfg = OmegaConf.to_container(cfg.translator, resolve=True)
    translator = served(translator_cfg, make_translator(translator_cfg))  # a scoped edit with its base model
    init_seconds = time.perf_counter() - started
    lines = None
    if cfg.input is not None:
        sentences = read_text_lines(cfg.input)
        source = str(cfg.input)
    elif isinstance(parser, PtbParser):
        sentences, source, lines = parser.sentences, str(parser.path), parser.lines
    else:
        raise UserError(f"input= is required with parser={cfg.parser.name}: a UTF-8 file of English "
                        "sentences, one per line")
    group = OmegaConf.to_container(cfg, resolve=True)
    summary = run_purity(sentences, parser, translator, out_dir, init_seconds=init_seconds, source=source, lines=lines,
                         suggest=group.get("suggest"), **run_settings(group))
    print(summary_table(summary), flush=True)
    return summary


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
