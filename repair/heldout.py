"""Which input sentences are held out, and which ones each cycle tests."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from repair.errors import UserError
from repair.fileio import read_json, read_text_lines, write_json_atomic

log = logging.getLogger("repair.loop")


@dataclass
class Heldout:
    sentences: list[str]  # the held-out input sentences: never tested before verify, never reviewed or fine-tuned on
    lines: list[int]  # their line numbers in the input
    references: dict | None  # the data's reference translations (demo), to judge translations by


def heldout_split(sentences: list[str], share: float, source: str = "input") -> tuple[list[int], list[int]]:
    """Indices of the held-out sentences and of the rest, each in input order.

    `share`: below 1, the share of the input's sentences to hold out; a whole number from 1 up, how many.
    The same texts are held out whatever the order of the input or the seed: the unique non-blank
    sentences sorted by their SHA-1, the first round(share * n) of them (or the first `share`). Every copy
    of a repeated sentence falls on the same side.
    """
    if share < 0 or (share >= 1 and share != int(share)):
        raise UserError(f"purity.holdout={share}: give the share of {source} to hold out (0 <= share < 1) "
                        f"or a number of sentences (a whole number from 1 up)")
    texts = {" ".join(s.split()) for s in sentences if s.strip()}
    ranked = sorted(texts, key=lambda t: hashlib.sha1(t.encode("utf-8")).hexdigest())
    held = set(ranked[: int(share) if share >= 1 else round(share * len(ranked))])
    heldout = [i for i, s in enumerate(sentences) if s.strip() and " ".join(s.split()) in held]
    rest = [i for i, s in enumerate(sentences) if s.strip() and " ".join(s.split()) not in held]
    return heldout, rest


def hold_out(run_dir: Path, input: Path, share: float, references: dict | None = None) -> tuple[Heldout | None, list[int]]:
    """The held-out sentences of `input` (recorded in run_dir/heldout.json) and the indices of the rest."""
    sentences = read_text_lines(input)
    held, rest = heldout_split(sentences, share, str(input))
    if not rest:
        raise UserError(f"{input}: no sentence left to test after holding out purity.holdout={share} of "
                        f"{len(held)}; lower purity.holdout")
    if not held:
        return None, rest
    heldout = Heldout([sentences[i] for i in held], [i + 1 for i in held], references)
    record = {"input": str(input), "share": share, "sentences": len(held), "lines": heldout.lines}
    path = run_dir / "heldout.json"
    if not path.exists() or read_json(path) != record:  # a resumed run leaves its record as it was
        write_json_atomic(path, record)
    log.info("held out %s of %s sentences of %s (purity.holdout=%s)", len(held), len(held) + len(rest), input, share)
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
