"""What a fine-tune trained on (its folder's sources.jsonl), read by the fine-tune stage, verify and the loop."""

from __future__ import annotations

from pathlib import Path

from repair.fileio import read_jsonl

SOURCES = "sources.jsonl"  # the pairs fine-tuning trained on, once each: {"source", "target"}


def read_sources(out: Path) -> set[str]:
    """The source texts the fine-tune in `out` trained on."""
    return {row["source"] for row in read_jsonl(out / SOURCES)}
