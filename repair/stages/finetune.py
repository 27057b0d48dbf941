"""The fine-tune stage: what the model is fine-tuned on, written down (sources.jsonl), and the fine-tune itself."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repair.fileio import read_json, read_jsonl, write_json_atomic, write_jsonl_atomic

if TYPE_CHECKING:
    from repair.nmt.preprocessing import ModelFiles

log = logging.getLogger("repair.loop")


@dataclass
class FinetuneSettings:
    """The `finetune` config group's keys, the run's seed and where torch runs."""

    lr: float
    patience: int
    max_epoch: int
    repeat: int  # each correction appears this many times
    replay: int  # original training pairs mixed in
    keep: int  # texts Purity found consistent, with the model's own translation
    seed: int
    device: str = "auto"
    threads: int | None = None


def finetune_pairs(settings: FinetuneSettings, corrections: list[dict], data_dir: Path | None,
                   test_dir: Path | None = None, issues: list[dict] = ()) -> list[tuple[str, str]]:
    """The corrections (`repeat` times each), `keep` texts of the test stage's translation table that
    Purity found consistent, and `replay` training pairs from data_dir, shuffled."""
    pairs = [(c["source"], c["correction"]) for c in corrections] * settings.repeat
    keep = settings.keep or 0
    if keep and test_dir is not None:
        from repair.issues import sources
        from repair.purity.run import TRANSLATIONS
        from repair.purity.translators import read_table

        table_path = test_dir / TRANSLATIONS
        if table_path.exists():
            # Texts Purity found consistent keep the model's own translation, so that learning
            # the corrections does not change how the rest of the phrases are translated.
            flagged = {c["source"] for c in corrections} | {s for i in issues for s in sources(i)}
            table = read_table(table_path, empty_ok=True)  # the model's own output may be empty
            consistent = [(src, tr) for src, tr in table.items() if src not in flagged and tr]
            pairs += random.Random(settings.seed).sample(consistent, min(keep, len(consistent)))
        else:
            log.warning("finetune.keep: %s is missing (a test stage from an older version); nothing kept", table_path)
    if settings.replay:
        from repair.data.prepare import read_clean_pairs

        train = read_clean_pairs(data_dir, "train")
        rng = random.Random(settings.seed)
        pairs += rng.sample(train, min(settings.replay, len(train)))
    random.Random(settings.seed).shuffle(pairs)
    return pairs


SOURCES = "sources.jsonl"  # the pairs fine-tuning trained on, once each: {"source", "target"}


def read_sources(out: Path) -> set[str]:
    """The source texts the fine-tune in `out` trained on."""
    return {row["source"] for row in read_jsonl(out / SOURCES)}


def run(out: Path, checkpoint: "ModelFiles", corrections: list[dict], data_dir: Path, settings: FinetuneSettings,
        test_dir: Path | None = None, issues: list[dict] = ()) -> dict:
    """Fine-tunes `checkpoint` on the corrections (see finetune_pairs) into `out`; the result (best
    checkpoint, curve) is read back on a resumed run. The training pairs are written to out/sources.jsonl
    (also for a fine-tune that finished before that file was written: the pairs are seeded)."""
    from repair.data.prepare import read_clean_pairs
    from repair.nmt.finetune import finetune_model

    result_path = out / "result.json"
    if result_path.exists() and (out / SOURCES).exists():
        return read_json(result_path)
    pairs = finetune_pairs(settings, corrections, data_dir, test_dir, issues)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(out / SOURCES, ({"source": s, "target": t} for s, t in dict.fromkeys(pairs)))
    if not result_path.exists():
        result = finetune_model(
            checkpoint,
            pairs,
            read_clean_pairs(data_dir, "valid"),
            out,
            lr=settings.lr,
            patience=settings.patience,
            max_epoch=settings.max_epoch,
            seed=settings.seed,
            device=settings.device,
            threads=settings.threads,
        )
        result = {k: (str(v) if isinstance(v, Path) else v) for k, v in result.items()}
        write_json_atomic(result_path, result)
    return read_json(result_path)
